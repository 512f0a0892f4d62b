// SHA256_Init/Update/Final are deprecated in OpenSSL 3 in favour of EVP,
// which has no way to export a midstate; they remain supported.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "tools/collector/sha256_midstate.h"

#include <fmt/format.h>
#include <openssl/sha.h>

#include <charconv>
#include <vector>

namespace loupe::collector {

struct ResumableSha256::State {
  SHA256_CTX context;
};

ResumableSha256::ResumableSha256() : state_(std::make_unique<State>()) {
  SHA256_Init(&state_->context);
}
ResumableSha256::~ResumableSha256() = default;
ResumableSha256::ResumableSha256(const ResumableSha256& other)
    : state_(std::make_unique<State>(*other.state_)), bytes_(other.bytes_) {}
ResumableSha256& ResumableSha256::operator=(const ResumableSha256& other) {
  *state_ = *other.state_;
  bytes_ = other.bytes_;
  return *this;
}

void ResumableSha256::Update(std::string_view bytes) {
  SHA256_Update(&state_->context, bytes.data(), bytes.size());
  bytes_ += bytes.size();
}

// "sha256-midstate <bytes> <h0> ... <h7>", the h in hex.
std::string ResumableSha256::Save() const {
  std::string saved = fmt::format("sha256-midstate {}", bytes_);
  for (unsigned word : state_->context.h) saved += fmt::format(" {:08x}", word);
  return saved;
}

std::optional<ResumableSha256> ResumableSha256::Restore(std::string_view saved) {
  std::vector<std::string_view> words;
  for (size_t at; (at = saved.find(' ')) != std::string_view::npos; saved.remove_prefix(at + 1)) {
    words.push_back(saved.substr(0, at));
  }
  words.push_back(saved);
  if (words.size() != 10 || words[0] != "sha256-midstate") return std::nullopt;
  ResumableSha256 sha;
  auto parse = [](std::string_view text, auto* value, int base) {
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value, base);
    return error == std::errc() && end == text.data() + text.size();
  };
  if (!parse(words[1], &sha.bytes_, 10) || sha.bytes_ % kBlockBytes != 0) return std::nullopt;
  for (size_t i = 0; i < 8; ++i) {
    if (!parse(words[2 + i], &sha.state_->context.h[i], 16)) return std::nullopt;
  }
  const uint64_t bits = sha.bytes_ * 8;
  sha.state_->context.Nl = static_cast<SHA_LONG>(bits);
  sha.state_->context.Nh = static_cast<SHA_LONG>(bits >> 32);
  sha.state_->context.num = 0;
  return sha;
}

std::string ResumableSha256::Digest() const {
  SHA256_CTX copy = state_->context;
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256_Final(reinterpret_cast<unsigned char*>(digest.data()), &copy);
  return digest;
}

}  // namespace loupe::collector
