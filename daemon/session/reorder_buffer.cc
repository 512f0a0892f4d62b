#include "daemon/session/reorder_buffer.h"

#include <algorithm>
#include <iterator>

namespace loupe::session {

OwnedEvent& ReorderBuffer::Next() {
  if (free_slots_.empty()) {
    free_slots_.push_back(static_cast<uint32_t>(slots_.size()));
    slots_.emplace_back(&extras_);
  }
  return slots_[free_slots_.back()];
}

void ReorderBuffer::Add() {
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  const uint64_t time_ns = slots_[slot].record.time_ns;
  newest_ = std::max(newest_, time_ns);
  order_.push_back({time_ns, sequence_++, slot});
}

void ReorderBuffer::ReleaseUntil(uint64_t limit, const Sink& sink) {
  // One ring serves every cpu, so what arrived since the last release is
  // nearly in order already: sorted alone, it merges into the waiting run
  // in one pass, where a heap paid a logarithm per event each way.
  const auto arrived = order_.begin() + static_cast<ptrdiff_t>(sorted_);
  if (!std::is_sorted(arrived, order_.end(), Earlier{})) std::sort(arrived, order_.end(), Earlier{});
  if (arrived != order_.end()) {
    // Only the waiting events newer than the oldest arrival move, through
    // a buffer kept for it (std::inplace_merge allocated one per release).
    const auto from = std::upper_bound(order_.begin(), arrived, *arrived, Earlier{});
    if (from != arrived) {
      merged_.clear();
      std::merge(from, arrived, arrived, order_.end(), std::back_inserter(merged_), Earlier{});
      std::copy(merged_.begin(), merged_.end(), from);
    }
  }
  // What is older than the limit leaves, and past `max_` the oldest too:
  // both are a prefix of the run.
  const size_t due = static_cast<size_t>(
      std::partition_point(order_.begin(), order_.end(),
                           [limit](const Pending& p) { return p.time_ns <= limit; }) -
      order_.begin());
  const size_t count = std::max(due, order_.size() > max_ ? order_.size() - max_ : 0);
  for (size_t i = 0; i < count; ++i) {
    const Pending& next = order_[i];
    if (next.time_ns < released_until_) {
      ++late_;  // its place in the trace has already been written
    } else {
      released_until_ = next.time_ns;
    }
    OwnedEvent& event = slots_[next.slot];
    sink(event);
    event.ReleaseExtras();
    free_slots_.push_back(next.slot);
  }
  order_.erase(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(count));
  sorted_ = order_.size();
}

}  // namespace loupe::session
