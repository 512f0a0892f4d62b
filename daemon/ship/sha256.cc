#include "daemon/ship/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <string>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"

namespace loupe::ship {

struct Sha256::Context {
  struct Free {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> md{EVP_MD_CTX_new()};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  EVP_DigestInit_ex(context_->md.get(), EVP_sha256(), nullptr);
}

Sha256::~Sha256() = default;

void Sha256::Update(std::string_view bytes) {
  EVP_DigestUpdate(context_->md.get(), bytes.data(), bytes.size());
}

std::string Sha256::Finish() {
  std::string digest(kSha256Bytes, '\0');
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->md.get(), reinterpret_cast<unsigned char*>(digest.data()), &length);
  EVP_DigestInit_ex(context_->md.get(), EVP_sha256(), nullptr);
  digest.resize(length);
  return digest;
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  Sha256 hash;
  // Small enough to stay in cache and not to fault in fresh pages per file.
  char buffer[64 << 10];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path);
    }
    if (got == 0) break;
    hash.Update(std::string_view(buffer, static_cast<size_t>(got)));
  }
  return hash.Finish();
}

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 15]);
  }
  return hex;
}

}  // namespace loupe::ship
