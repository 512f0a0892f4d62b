// Puts events from all cpus and sources in timestamp order. An event is held
// until events up to `window` later have been seen; one that arrives after
// its place has been written is still written, and counted as late.
#ifndef LOUPE_DAEMON_SESSION_REORDER_BUFFER_H_
#define LOUPE_DAEMON_SESSION_REORDER_BUFFER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "daemon/session/owned_event.h"

namespace loupe::session {

class ReorderBuffer {
 public:
  using Sink = std::function<void(OwnedEvent&)>;
  // `max_events` bounds memory: past it the oldest are released early.
  ReorderBuffer(uint64_t window_ns, size_t max_events) : window_ns_(window_ns), max_(max_events) {}
  // The slots point at the buffer's pool of extras.
  ReorderBuffer(const ReorderBuffer&) = delete;
  ReorderBuffer& operator=(const ReorderBuffer&) = delete;

  // The slot for the next event, to decode into: a released event's, so
  // its buffers are reused. Until Add(), the same slot again.
  OwnedEvent& Next();
  // Puts the event decoded into Next()'s slot in order.
  void Add();
  // Releases, in order, every event older than the window. `now_ns` (the
  // events' clock) moves the window on even when no new events come, so a
  // quiet target's last events are not held back.
  void Release(uint64_t now_ns, const Sink& sink) {
    const uint64_t front = std::max(newest_, now_ns);
    ReleaseUntil(front > window_ns_ ? front - window_ns_ : 0, sink);
  }
  // Releases everything (at the end of a session).
  void Flush(const Sink& sink) { ReleaseUntil(UINT64_MAX, sink); }

  uint64_t late() const { return late_; }
  // Events before this time have been released: one added now would be late.
  uint64_t released_until() const { return released_until_; }
  size_t size() const { return order_.size(); }

 private:
  // The run holds these, not the events: an event is several hundred
  // bytes, moved once into its slot rather than at every step of the sort.
  struct Pending {
    uint64_t time_ns;
    uint64_t sequence;  // equal times leave in arrival order
    uint32_t slot;
  };
  struct Earlier {  // a type, not a function pointer, so the sort inlines it
    bool operator()(const Pending& a, const Pending& b) const {
      return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.sequence < b.sequence;
    }
  };
  void ReleaseUntil(uint64_t limit, const Sink& sink);

  uint64_t window_ns_;
  size_t max_;
  ExtrasPool extras_;  // the slots point at it
  std::vector<OwnedEvent> slots_;
  std::vector<uint32_t> free_slots_;  // the last one is Next()'s
  // Sorted on (time, sequence) up to `sorted_`, then in arrival order.
  std::vector<Pending> order_;
  std::vector<Pending> merged_;  // where the run and the arrivals meet, merged
  size_t sorted_ = 0;
  uint64_t sequence_ = 0;
  uint64_t newest_ = 0;
  uint64_t released_until_ = 0;  // time of the last event released
  uint64_t late_ = 0;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_REORDER_BUFFER_H_
