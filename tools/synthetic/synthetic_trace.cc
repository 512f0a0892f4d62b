#include "tools/synthetic/synthetic_trace.h"

#include <fmt/format.h>

namespace loupe::synthetic {
namespace {

constexpr std::string_view kSpanNames[] = {"handle_request", "parse", "db_query", "render",
                                           "flush"};

}  // namespace

Trace::Trace(Options options)
    : options_(options),
      rng_(options.seed),
      gap_in_burst_(1.0 / options.mean_gap_in_burst_ns),
      gap_between_bursts_(1.0 / options.mean_gap_between_bursts_ns),
      burst_length_(1.0 / options.mean_burst_events),
      now_ns_(options.start_ns),
      running_(options.cpus),
      runqueue_(options.cpus),
      open_spans_(options.threads) {
  // Stacks share their outer frames (main, the event loop) and differ inside,
  // as real ones do; addresses cluster in a few modules.
  const uint64_t modules[] = {0x55d4a2c00000, 0x7f3b1e200000, 0x7f3b1e800000};
  std::vector<uint64_t> functions;
  for (int i = 0; i < 400; ++i) {
    functions.push_back(modules[i % 3] + 0x1000 + (rng_() % 0x200000 & ~uint64_t{0xf}));
  }
  for (int s = 0; s < options_.distinct_stacks; ++s) {
    const int depth = 10 + static_cast<int>(rng_() % 21);
    std::vector<uint64_t> stack;
    for (int d = 0; d < depth; ++d) {
      const bool shared_outer = d >= depth - 4;
      const uint64_t function = functions[shared_outer ? d % 8 : rng_() % functions.size()];
      stack.push_back(function + rng_() % 0x80);  // a return address inside it
    }
    user_stacks_.push_back(std::move(stack));
    std::vector<uint64_t> kernel;
    for (int d = 0; d < 6; ++d) kernel.push_back(0xffffffff81000000 + (rng_() % 0x800000));
    kernel_stacks_.push_back(std::move(kernel));
  }
  for (int c = 0; c < options_.cpus; ++c) running_[c] = static_cast<uint32_t>(c);
  for (int t = 0; t < options_.threads; ++t) thread_names_.push_back(fmt::format("worker-{}", t));
  for (int i = 0; i < 256; ++i) {
    field_sets_.push_back({format::Field{"status", format::Value::Int(i % 10 == 0 ? 500 : 200)},
                           format::Field{"bytes", format::Value::Bytes(512 + rng_() % 4096)},
                           format::Field{"cached", format::Value::Bool(i % 2)}});
  }
}

std::vector<format::Record> Trace::Identity() const {
  std::vector<format::Record> records;
  for (uint32_t pid : {Tid(0), Tid(options_.threads / 2)}) {
    records.push_back({.time_ns = options_.start_ns,
                       .tid = pid,
                       .payload = format::ProcessInfo{.ppid = 1,
                                                      .ns_pid = pid,
                                                      .uid = 1000,
                                                      .start_time = 4242,
                                                      .name = "synthetic",
                                                      .exe = "/usr/bin/synthetic"}});
  }
  for (int t = 0; t < options_.threads; ++t) {
    const uint32_t pid = t < options_.threads / 2 ? Tid(0) : Tid(options_.threads / 2);
    records.push_back({.time_ns = options_.start_ns,
                       .tid = Tid(t),
                       .payload = format::ThreadInfo{pid, Tid(t), thread_names_[t]}});
  }
  return records;
}

format::Record Trace::Next() {
  if (burst_left_ == 0 || !options_.bursty) {
    burst_cpu_ = static_cast<uint32_t>(rng_() % options_.cpus);
    burst_left_ = burst_length_(rng_) + 1;
    now_ns_ += static_cast<uint64_t>(gap_between_bursts_(rng_)) + 1;
  } else {
    now_ns_ += static_cast<uint64_t>(gap_in_burst_(rng_)) + 1;
  }
  --burst_left_;
  const uint32_t cpu = burst_cpu_;
  const uint32_t current = running_[cpu];
  format::Record record{.time_ns = now_ns_, .tid = Tid(current), .cpu = cpu, .payload = {}};
  const uint32_t roll = rng_() % 100;

  if (roll < 30) {  // switch to the longest-waiting woken thread, as a scheduler would
    std::vector<uint32_t>& queue = runqueue_[cpu];
    const bool preempted = rng_() % 4 == 0;
    uint32_t next = static_cast<uint32_t>(rng_() % options_.threads);
    if (!queue.empty()) {
      next = queue.front();
      queue.erase(queue.begin());
    }
    if (preempted) queue.push_back(current);
    running_[cpu] = next;
    record.payload = format::SchedSwitch{Tid(next), preempted ? 0u : 1u};
  } else if (roll < 50) {  // wake a partner thread, usually onto this cpu
    const uint32_t woken = (current + 1 + static_cast<uint32_t>(rng_() % 3)) % options_.threads;
    const uint32_t target = rng_() % 4 == 0 ? (cpu + 1) % options_.cpus : cpu;
    if (runqueue_[target].size() < 8) runqueue_[target].push_back(woken);
    record.payload = format::SchedWakeup{Tid(woken), target, false};
  } else if (roll < 62) {  // a CPU sample; hot stacks dominate
    const size_t s = std::min<size_t>(
        user_stacks_.size() - 1,
        static_cast<size_t>(std::exponential_distribution<>(10.0 / user_stacks_.size())(rng_)));
    record.payload = format::CpuSample{
        user_stacks_[s], rng_() % 3 == 0 ? format::Stack(kernel_stacks_[s]) : format::Stack()};
  } else if (roll < 92) {  // span begin or end on the running thread
    std::vector<uint64_t>& open = open_spans_[current];
    if (!open.empty() && (open.size() >= 4 || rng_() % 2 == 0)) {
      record.payload = format::SpanEnd{open.back()};
      open.pop_back();
    } else {
      const uint64_t id = next_span_id_++;
      record.payload = format::SpanBegin{.span_id = id,
                                         .parent_id = open.empty() ? 0 : open.back(),
                                         .operation_id = open.empty() ? id : 0,
                                         .name = kSpanNames[open.size()]};
      open.push_back(id);
    }
  } else if (roll < 97) {  // a typed event
    record.payload = format::Instant{"response", 0, field_sets_[rng_() % field_sets_.size()]};
  } else {
    record.payload = format::Counter{"queue_depth", format::Value::Int(rng_() % 64)};
  }
  return record;
}

}  // namespace loupe::synthetic
