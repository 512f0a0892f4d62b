#include "daemon/format/loss_tally.h"

#include <fmt/format.h>

namespace loupe::format {

std::string LossKey(LossSource source, LossReason reason) {
  return fmt::format("{}/{}", LossSourceName(source), LossReasonName(reason));
}

bool IsCutKey(std::string_view key) {
  const size_t slash = key.rfind('/');
  const std::string_view reason = slash == std::string_view::npos ? key : key.substr(slash + 1);
  for (int value = 1; value <= kMaxLossReason; ++value) {
    const auto candidate = static_cast<LossReason>(value);
    if (LossReasonName(candidate) == reason) return IsCut(candidate);
  }
  return false;
}

void LossTally::Add(std::string_view key, uint64_t count) {
  if (count == 0) return;
  (IsCutKey(key) ? cut : lost)[std::string(key)] += count;
}

std::vector<std::string> LossTally::Lines() const {
  std::vector<std::string> lines;
  for (const auto& [what, count] : lost) lines.push_back(fmt::format("lost {} ({})", count, what));
  for (const auto& [what, count] : cut) lines.push_back(fmt::format("cut {} ({})", count, what));
  return lines;
}

LossTally TallyLosses(const std::map<std::string, uint64_t>& by_key) {
  LossTally tally;
  for (const auto& [key, count] : by_key) tally.Add(key, count);
  return tally;
}

}  // namespace loupe::format
