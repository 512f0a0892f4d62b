// An event that owns its stacks and text, so it can wait in the reorder
// buffer after the ring-buffer record it came from is gone. View() gives
// the format::Record, with views into this object.
#ifndef LOUPE_DAEMON_SESSION_OWNED_EVENT_H_
#define LOUPE_DAEMON_SESSION_OWNED_EVENT_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/format/record.h"

namespace loupe::session {

// A field of an instant event with its key and text owned.
struct OwnedField {
  std::string key;
  format::ValueType type = format::ValueType::kInt;
  uint64_t bits = 0;
  std::string text;
};

// A task's name as the kernel keeps it (at most 15 bytes), held in place:
// most switches carry one or two, and a string each made every reorder
// slot 64 bytes larger.
class TaskComm {
 public:
  static constexpr size_t kMaxSize = 15;
  void Assign(std::string_view name) {
    size_ = static_cast<uint8_t>(std::min(name.size(), kMaxSize));
    std::copy_n(name.data(), size_, bytes_);
  }
  void clear() { size_ = 0; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {bytes_, size_}; }
  bool operator==(const TaskComm& other) const { return view() == other.view(); }

 private:
  char bytes_[kMaxSize];
  uint8_t size_ = 0;
};

// The parts only some kinds of events have. Kept apart so the events
// waiting in the reorder buffer (a drain's whole backlog, ~100 k of them
// when busy) do not each carry their room.
struct EventExtras {
  // User frames (by index) whose address is where the code was, not a
  // return address: those a signal interrupted. The leaf always is.
  std::vector<uint16_t> exact_frames;
  std::string value_text;          // a USDT string argument, a foreign thread's process name
  std::vector<int64_t> args;       // of a USDT or uprobe event
  std::vector<OwnedField> fields;  // of an instant event
  std::vector<format::Field> field_views;

  void Clear() {
    exact_frames.clear();
    value_text.clear();
    args.clear();
    fields.clear();
    field_views.clear();
  }
};

// Extras no event holds, with their buffers, for the next event that needs
// some: how many exist is bounded by how many events hold extras at once.
class ExtrasPool {
 public:
  std::unique_ptr<EventExtras> Take() {
    if (spare_.empty()) return std::make_unique<EventExtras>();
    std::unique_ptr<EventExtras> extras = std::move(spare_.back());
    spare_.pop_back();
    return extras;
  }
  void Give(std::unique_ptr<EventExtras> extras) {
    extras->Clear();
    spare_.push_back(std::move(extras));
  }

 private:
  std::vector<std::unique_ptr<EventExtras>> spare_;
};

class OwnedEvent {
 public:
  OwnedEvent() = default;
  // An event whose extras come from, and go back to, `pool`.
  explicit OwnedEvent(ExtrasPool* pool) : pool_(pool) {}

  format::Record record;         // views are set by View()
  std::vector<uint64_t> frames;  // user frames, then kernel frames
  std::string text;              // a name or a path
  // For switches: the processes on both sides (targets are decided by tgid);
  // for wakeups, prev is the waker (when a task) and next the woken.
  uint32_t prev_tgid = 0;
  uint32_t next_tgid = 0;
  uint16_t user_depth = 0;
  // For switches of a target and execs: how long the thread had run
  // (loupe_sched_switch, loupe_process_exec).
  uint32_t prev_ran_ns = 0;
  // For switches of a target: the low 32 bits of its time queued in all
  // (loupe_sched_switch.prev_run_delay_ns).
  uint32_t prev_run_delay_ns = 0;
  // For uprobe entries and returns: the user stack pointer (UprobePairer).
  uint64_t user_sp = 0;
  // The user stack walk met an address no user frame can have; the frames
  // from there on were dropped.
  bool unwind_stopped = false;
  // For switches and wakeups: the names of sides that are not targets
  // (empty otherwise).
  TaskComm prev_comm;
  TaskComm next_comm;

  // The extras, made (or taken from the pool) on first use.
  EventExtras& extras() {
    if (!extras_) extras_ = pool_ != nullptr ? pool_->Take() : std::make_unique<EventExtras>();
    return *extras_;
  }
  std::span<const uint16_t> exact_frames() const {
    return extras_ ? std::span<const uint16_t>(extras_->exact_frames) : std::span<const uint16_t>();
  }
  std::string_view value_text() const { return extras_ ? extras_->value_text : std::string_view(); }
  std::span<const int64_t> args() const {
    return extras_ ? std::span<const int64_t>(extras_->args) : std::span<const int64_t>();
  }

  // Empties the event for the next one, keeping its buffers: a reorder
  // slot decoded into again allocates nothing for its stacks or names.
  // A new member must be reset here too.
  void Clear() {
    record = {};
    frames.clear();
    text.clear();
    prev_tgid = 0;
    next_tgid = 0;
    user_depth = 0;
    prev_ran_ns = 0;
    prev_run_delay_ns = 0;
    user_sp = 0;
    unwind_stopped = false;
    prev_comm.clear();
    next_comm.clear();
    ReleaseExtras();
  }
  // Gives the extras back to the pool (an event without one keeps them,
  // emptied): a released reorder slot may wait long before it is reused.
  void ReleaseExtras() {
    if (!extras_) return;
    if (pool_ != nullptr) {
      pool_->Give(std::move(extras_));
    } else {
      extras_->Clear();
    }
  }

  format::Stack UserStack() const { return {frames.data(), user_depth}; }
  format::Stack KernelStack() const {
    return {frames.data() + user_depth, frames.size() - user_depth};
  }

  const format::Record& View();

 private:
  void ViewInstant(format::Instant& instant);

  std::unique_ptr<EventExtras> extras_;
  ExtrasPool* pool_ = nullptr;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_OWNED_EVENT_H_
