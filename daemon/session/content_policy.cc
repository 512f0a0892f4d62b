#include "daemon/session/content_policy.h"

#include <fmt/format.h>
#include <sys/random.h>

namespace loupe::session {

absl::StatusOr<ContentPolicy> ParseContentPolicy(std::string_view name) {
  if (name == "names" || name == "default") return ContentPolicy::kNames;
  if (name == "full") return ContentPolicy::kFull;
  return absl::InvalidArgumentError(
      fmt::format("content policy '{}' is unknown: use 'names' (the default: string values are "
                  "kept as length and hash) or 'full'",
                  name));
}

std::string_view ContentPolicyName(ContentPolicy policy) {
  return policy == ContentPolicy::kFull ? "full" : "names";
}

ContentFilter::ContentFilter(ContentPolicy policy) : policy_(policy), key_(0) {
  if (getrandom(&key_, sizeof key_, 0) != sizeof key_) key_ = 0x9e3779b97f4a7c15;
}

std::string ContentFilter::Apply(std::string_view captured, uint64_t length) const {
  if (policy_ == ContentPolicy::kFull) return std::string(captured);
  // FNV-1a over the session key then the value: stable within the session,
  // meaningless outside it. It hides values from casual reading, it is not
  // a cryptographic commitment.
  uint64_t hash = 0xcbf29ce484222325;
  auto mix = [&hash](uint8_t byte) {
    hash ^= byte;
    hash *= 0x100000001b3;
  };
  for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(key_ >> (8 * i)));
  for (char c : captured) mix(static_cast<uint8_t>(c));
  return fmt::format("<redacted {} bytes #{:016x}>", length, hash);
}

}  // namespace loupe::session
