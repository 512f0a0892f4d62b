// SHA-256 of segment files: the digest a shipper announces and a collector
// checks before acknowledging. OpenSSL's libcrypto, already pulled in by gRPC.
#ifndef LOUPE_DAEMON_SHIP_SHA256_H_
#define LOUPE_DAEMON_SHIP_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::ship {

inline constexpr size_t kSha256Bytes = 32;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // The 32-byte digest; the object starts over afterwards.
  std::string Finish();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// Reads the whole file.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

std::string HexOf(std::string_view bytes);

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_SHA256_H_
