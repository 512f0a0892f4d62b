// What the daemon keeps of the text an application hands over. Names (of
// spans, events, counters, fields, probes) are always kept: they are the
// program's vocabulary. String values (event fields, USDT string arguments)
// are kept as they are only under `full`; under the default `names` policy
// each becomes its length and a hash keyed per session, enough to see that
// two values are equal without keeping either.
#ifndef LOUPE_DAEMON_SESSION_CONTENT_POLICY_H_
#define LOUPE_DAEMON_SESSION_CONTENT_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::session {

enum class ContentPolicy { kNames, kFull };

absl::StatusOr<ContentPolicy> ParseContentPolicy(std::string_view name);
std::string_view ContentPolicyName(ContentPolicy policy);

class ContentFilter {
 public:
  explicit ContentFilter(ContentPolicy policy);  // draws the session's hash key
  ContentPolicy policy() const { return policy_; }
  // The value itself under `full`, else "<redacted N bytes #HASH>", N the
  // value's whole length and the hash over what was captured of it.
  std::string Apply(std::string_view captured, uint64_t length) const;

 private:
  ContentPolicy policy_;
  uint64_t key_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_CONTENT_POLICY_H_
