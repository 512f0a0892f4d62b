// One reading of losses for every place that states a verdict (attach's last
// line, status, verify, report): counts keyed "source/reason", lost events
// apart from cut content. Lost events make a trace INCOMPLETE; cuts (a stack
// past the depth cap, a string past its cap, a stack walk stopped at a bad
// frame) are told but leave it complete.
#ifndef LOUPE_DAEMON_FORMAT_LOSS_TALLY_H_
#define LOUPE_DAEMON_FORMAT_LOSS_TALLY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/format/record.h"

namespace loupe::format {

std::string LossKey(LossSource source, LossReason reason);
// For a "source/reason" key; unknown reasons count as losses.
bool IsCutKey(std::string_view key);

struct LossTally {
  std::map<std::string, uint64_t> lost;  // "source/reason" -> count
  std::map<std::string, uint64_t> cut;

  void Add(std::string_view key, uint64_t count);
  void Add(LossSource source, LossReason reason, uint64_t count) {
    Add(LossKey(source, reason), count);
  }
  bool complete() const { return lost.empty(); }
  // "lost N (source/reason)" then "cut N (source/reason)".
  std::vector<std::string> Lines() const;
};

LossTally TallyLosses(const std::map<std::string, uint64_t>& by_key);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_LOSS_TALLY_H_
