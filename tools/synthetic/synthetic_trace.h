// A deterministic stream of records shaped like a busy service's trace:
// switches and wakeups among a few dozen threads, CPU samples whose stacks
// come from a few hundred distinct ones, span begin/end pairs with a handful
// of names, typed instant events and counters. Used by `tracectl demo`, and
// by the format tests, the fuzzers' seeds and the format benchmark.
#ifndef LOUPE_TOOLS_SYNTHETIC_SYNTHETIC_TRACE_H_
#define LOUPE_TOOLS_SYNTHETIC_SYNTHETIC_TRACE_H_

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "daemon/format/record.h"

namespace loupe::synthetic {

struct Options {
  uint64_t seed = 1;
  int threads = 40;
  int cpus = 4;
  int distinct_stacks = 300;
  // Events come in bursts: a thread on one cpu emits a few in a row (a span,
  // its events, a switch), then another cpu's activity follows. bursty=false
  // draws every event's cpu and gap independently: the worst case for
  // compression.
  bool bursty = true;
  double mean_burst_events = 4;
  double mean_gap_in_burst_ns = 150;
  double mean_gap_between_bursts_ns = 1500;
  uint64_t start_ns = 1'000'000'000;
};

class Trace {
 public:
  explicit Trace(Options options = {});

  // The next record; its views stay valid for the generator's lifetime.
  format::Record Next();
  // Process and thread records describing the generated threads.
  std::vector<format::Record> Identity() const;

 private:
  uint32_t Tid(int thread) const { return 1000 + static_cast<uint32_t>(thread); }

  Options options_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_in_burst_;
  std::exponential_distribution<double> gap_between_bursts_;
  std::geometric_distribution<int> burst_length_;
  int burst_left_ = 0;
  uint32_t burst_cpu_ = 0;
  uint64_t now_ns_;
  std::vector<std::vector<uint64_t>> user_stacks_;
  std::vector<std::vector<uint64_t>> kernel_stacks_;
  std::vector<uint32_t> running_;                  // thread index on each cpu
  std::vector<std::vector<uint32_t>> runqueue_;    // woken threads waiting per cpu
  std::vector<std::vector<uint64_t>> open_spans_;  // per thread
  uint64_t next_span_id_ = 1;
  std::vector<std::array<format::Field, 3>> field_sets_;  // views must outlive Next()
  std::vector<std::string> thread_names_;
};

}  // namespace loupe::synthetic

#endif  // LOUPE_TOOLS_SYNTHETIC_SYNTHETIC_TRACE_H_
