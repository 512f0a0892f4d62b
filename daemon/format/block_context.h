// What the encoder and the decoder both know of a block's events so far, from
// which coding 2 (see EventBlock.coding) predicts the next event's fields:
// each side observes every event after coding it, so both predict alike.
// Only this block's events count: blocks decode alone.
#ifndef LOUPE_DAEMON_FORMAT_BLOCK_CONTEXT_H_
#define LOUPE_DAEMON_FORMAT_BLOCK_CONTEXT_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "daemon/format/block_layout.h"
#include "daemon/format/record.h"

namespace loupe::format {

// A span's parent as coding 2 writes it, given the predicted parent (the
// thread's innermost open span, 0 for none): with d = span_id - parent_id,
// the d of the predicted parent is coded 0 and d = 0 (a span its own
// parent) takes that one's code. A swap of two values, so every pair of ids
// round-trips.
inline uint64_t ParentCode(uint64_t span_id, uint64_t parent_id, uint64_t predicted) {
  const uint64_t d = span_id - parent_id, predicted_d = span_id - predicted;
  if (d == predicted_d) return 0;
  return d == 0 ? predicted_d : d;
}
inline uint64_t ParentFromCode(uint64_t span_id, uint64_t code, uint64_t predicted) {
  const uint64_t predicted_d = span_id - predicted;
  const uint64_t d = code == 0 ? predicted_d : code == predicted_d ? 0 : code;
  return span_id - d;
}

class BlockContext {
 public:
  // What is known of one thread. A thread shares its slot with every tid of
  // the same remainder; a slot holding another tid predicts nothing.
  struct Thread {
    uint32_t tid = 0;
    uint32_t out_state = 0;       // prev_state of its last switch-out
    uint64_t switched_out_ns = 0;  // 0: not seen this block
    uint64_t woken_ns = 0;         // its last wakeup, 0: none seen
    uint32_t waker_tid = 0;
    uint64_t operation_id = 0;       // the one it is on: its last event's, 0 after an end
    uint64_t last_operation_id = 0;  // the last one begun or carried, kept after its end
    // Its innermost open spans, innermost last; deeper ones are forgotten.
    std::array<uint64_t, 4> open_spans{};
    uint32_t open_count = 0;
  };

  void Reset() {
    wakeup_target_.fill(0);
    running_tid_.fill(0);
    threads_.fill({});
  }

  // The thread the last sched_switch on `cpu` switched to, 0 if none; for
  // cpus beyond the table, nullptr.
  uint32_t* RunningTid(uint32_t cpu) {
    return cpu < running_tid_.size() ? &running_tid_[cpu] : nullptr;
  }

  // The thread a switch on `cpu` most likely switches to: the one last woken
  // onto it. 0 when none was.
  uint32_t WokenOnto(uint32_t cpu) const {
    return cpu < wakeup_target_.size() ? wakeup_target_[cpu] : 0;
  }

  // The slot of `tid` when it holds what is known of it, else nullptr.
  const Thread* Find(uint32_t tid) const {
    const Thread& slot = threads_[tid % threads_.size()];
    return slot.tid == tid && tid != 0 ? &slot : nullptr;
  }

  // What an off_cpu event of `tid` switched in at `time_ns` most likely
  // says: away since its switch-out, waiting since its wakeup (or since the
  // switch-out, when it left runnable and nothing woke it), the state it
  // left in, its waker, and the operation it was on. Zeros for what is not
  // known.
  OffCpu PredictOffCpu(uint32_t tid, uint64_t time_ns) const {
    OffCpu off;
    const Thread* t = Find(tid);
    if (t == nullptr) return off;
    off.operation_id = t->operation_id;
    if (t->switched_out_ns != 0) {
      off.duration_ns = time_ns - t->switched_out_ns;
      off.runq_ns = off.duration_ns;
      off.prev_state = t->out_state;
    }
    if (t->woken_ns != 0 && t->woken_ns >= t->switched_out_ns) {
      off.runq_ns = time_ns - t->woken_ns;
      off.waker_tid = t->waker_tid;
    }
    return off;
  }

  // The operation the thread is on, 0 when not known.
  uint64_t PredictOperation(uint32_t tid) const {
    const Thread* t = Find(tid);
    return t != nullptr ? t->operation_id : 0;
  }
  // The id of the thread's next operation: one past its last.
  uint64_t PredictNextOperation(uint32_t tid) const {
    const Thread* t = Find(tid);
    return t != nullptr ? t->last_operation_id + 1 : 0;
  }
  // The thread's innermost open span: the parent of a span it begins and
  // the span it ends next. 0 when none is known.
  uint64_t PredictSpan(uint32_t tid) const {
    const Thread* t = Find(tid);
    return t != nullptr && t->open_count > 0 ? t->open_spans[t->open_count - 1] : 0;
  }

  // Called with every event once it is coded (encoder) or decoded (decoder).
  // A switch on the kind: the decoder calls it for every event.
  void Observe(const Record& record) {
    switch (record.kind()) {
      case RecordKind::kSchedSwitch: {
        const auto& r = *std::get_if<SchedSwitch>(&record.payload);
        if (uint32_t* running = RunningTid(record.cpu)) *running = r.next_tid;
        Thread& out = Slot(record.tid);
        out.switched_out_ns = record.time_ns;
        out.out_state = r.prev_state;
        break;
      }
      case RecordKind::kSchedWakeup: {
        const auto& r = *std::get_if<SchedWakeup>(&record.payload);
        if (r.target_cpu < wakeup_target_.size()) wakeup_target_[r.target_cpu] = r.woken_tid;
        Thread& woken = Slot(r.woken_tid);
        woken.woken_ns = record.time_ns;
        woken.waker_tid = record.tid;
        break;
      }
      case RecordKind::kOperationEnd: {
        Thread& t = Slot(record.tid);
        t.operation_id = 0;
        t.last_operation_id = std::get_if<OperationEnd>(&record.payload)->operation_id;
        break;
      }
      case RecordKind::kSpanEnd: {
        Thread& t = Slot(record.tid);
        const uint64_t span = std::get_if<SpanEnd>(&record.payload)->span_id;
        if (t.open_count > 0 && t.open_spans[t.open_count - 1] == span) --t.open_count;
        break;
      }
      case RecordKind::kSpanBegin: {
        const auto& r = *std::get_if<SpanBegin>(&record.payload);
        Thread& t = OnOperation(record.tid, r.operation_id);
        if (t.open_count == t.open_spans.size()) {  // the outermost is forgotten
          std::copy(t.open_spans.begin() + 1, t.open_spans.end(), t.open_spans.begin());
          --t.open_count;
        }
        t.open_spans[t.open_count++] = r.span_id;
        break;
      }
      case RecordKind::kOperationBegin:
        OnOperation(record.tid, std::get_if<OperationBegin>(&record.payload)->operation_id);
        break;
      case RecordKind::kCpuSample:
        OnOperation(record.tid, std::get_if<CpuSample>(&record.payload)->operation_id);
        break;
      case RecordKind::kOffCpu:
        OnOperation(record.tid, std::get_if<OffCpu>(&record.payload)->operation_id);
        break;
      case RecordKind::kInstant:
        OnOperation(record.tid, std::get_if<Instant>(&record.payload)->operation_id);
        break;
      default:
        break;
    }
  }

 private:
  Thread& OnOperation(uint32_t tid, uint64_t operation_id) {
    Thread& t = Slot(tid);
    t.operation_id = operation_id;
    if (operation_id != 0) t.last_operation_id = operation_id;
    return t;
  }

  // The slot for `tid`, taken over (cleared) if another thread held it.
  Thread& Slot(uint32_t tid) {
    Thread& slot = threads_[tid % threads_.size()];
    if (slot.tid != tid) slot = Thread{.tid = tid};
    return slot;
  }

  std::array<uint32_t, layout::kPredictedCpus> wakeup_target_{};
  std::array<uint32_t, layout::kPredictedCpus> running_tid_{};
  std::array<Thread, 256> threads_{};  // small enough to stay in the L1 cache
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_BLOCK_CONTEXT_H_
