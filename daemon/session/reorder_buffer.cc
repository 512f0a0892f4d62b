#include "daemon/session/reorder_buffer.h"

#include <algorithm>

namespace loupe::session {
void ReorderBuffer::Add(OwnedEvent event) {
  const uint64_t time_ns = event.record.time_ns;
  newest_ = std::max(newest_, time_ns);
  uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::move(event));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(event);
  }
  order_.push_back({time_ns, sequence_++, slot});
  std::push_heap(order_.begin(), order_.end(), Later);
}

void ReorderBuffer::ReleaseUntil(uint64_t limit, const Sink& sink) {
  while (!order_.empty() && (order_.front().time_ns <= limit || order_.size() > max_)) {
    std::pop_heap(order_.begin(), order_.end(), Later);
    const Pending next = order_.back();
    order_.pop_back();
    if (next.time_ns < released_until_) {
      ++late_;  // its place in the trace has already been written
    } else {
      released_until_ = next.time_ns;
    }
    sink(slots_[next.slot]);
    free_slots_.push_back(next.slot);
  }
}

}  // namespace loupe::session
