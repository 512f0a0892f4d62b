// SHA-256 that can be saved between blocks and resumed in another process:
// an S3 upload resumed by another collector continues the digest of the
// parts already stored without reading them back (S3 cannot read the parts
// of an unfinished multipart upload). EVP cannot export its state, so this
// uses OpenSSL's SHA256_CTX, whose chaining values and length are the state.
#ifndef LOUPE_TOOLS_COLLECTOR_SHA256_MIDSTATE_H_
#define LOUPE_TOOLS_COLLECTOR_SHA256_MIDSTATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace loupe::collector {

class ResumableSha256 {
 public:
  static constexpr uint64_t kBlockBytes = 64;

  ResumableSha256();
  ~ResumableSha256();
  ResumableSha256(const ResumableSha256& other);
  ResumableSha256& operator=(const ResumableSha256& other);

  // The state Save() wrote; nullopt when `saved` is not one.
  static std::optional<ResumableSha256> Restore(std::string_view saved);

  void Update(std::string_view bytes);
  uint64_t bytes() const { return bytes_; }
  // Text that Restore() takes back. Only at a block boundary (bytes() a
  // multiple of kBlockBytes), where no input waits in the buffer.
  std::string Save() const;
  // The 32-byte digest of everything so far (this object is left as it was).
  std::string Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint64_t bytes_ = 0;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_SHA256_MIDSTATE_H_
