#include "daemon/session/reorder_buffer.h"

#include <algorithm>

namespace loupe::session {
namespace {

// Later first, so the heap's front is the oldest event.
bool Later(const OwnedEvent& a, const OwnedEvent& b) { return a.record.time_ns > b.record.time_ns; }

}  // namespace

void ReorderBuffer::Add(OwnedEvent event) {
  newest_ = std::max(newest_, event.record.time_ns);
  pending_.push_back(std::move(event));
  std::push_heap(pending_.begin(), pending_.end(), Later);
}

void ReorderBuffer::ReleaseUntil(uint64_t limit, const Sink& sink) {
  while (!pending_.empty() &&
         (pending_.front().record.time_ns <= limit || pending_.size() > max_)) {
    std::pop_heap(pending_.begin(), pending_.end(), Later);
    OwnedEvent& event = pending_.back();
    if (event.record.time_ns < released_until_) {
      ++late_;  // its place in the trace has already been written
    } else {
      released_until_ = event.record.time_ns;
    }
    sink(event);
    pending_.pop_back();
  }
}

}  // namespace loupe::session
