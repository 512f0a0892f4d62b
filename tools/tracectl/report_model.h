// What `tracectl report` says about a trace, accumulated as it streams by:
// per thread on-CPU and off-CPU time (by what the thread was doing) and
// run-queue waits; the hottest functions and the stacks that blocked
// longest; spans and uprobe calls by name with percentiles; USDT counts.
// Memory is bounded by threads, names and distinct stacks, not by length.
#ifndef LOUPE_TOOLS_TRACECTL_REPORT_MODEL_H_
#define LOUPE_TOOLS_TRACECTL_REPORT_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/format/record.h"
#include "tools/tracectl/latency_histogram.h"
#include "tools/tracectl/stack_profile.h"
#include "tools/tracectl/thread_directory.h"

namespace loupe::tracectl {

struct ReportFilter {
  std::optional<uint32_t> pid;
  uint64_t since_ns = 0;            // relative to the first event
  uint64_t until_ns = UINT64_MAX;   // relative to the first event
  std::optional<uint64_t> operation;
};

struct ThreadTotals {
  uint64_t on_cpu_ns = 0;
  std::map<std::string, uint64_t> off_cpu_ns;  // by what it was doing, after Finish()
  // Until then by (state at switch-out, kernel stack): named only once the
  // segments' symbol tables (which follow their events) are read.
  std::map<std::pair<uint32_t, std::vector<uint64_t>>, uint64_t> off_cpu_raw;
  LatencyHistogram runq;
  uint64_t samples = 0;
};

struct FunctionCost {
  std::string name;
  uint64_t self = 0, total = 0;  // samples
};

struct BlockingStack {
  std::vector<NamedFrame> frames;  // innermost first
  uint64_t off_cpu_ns = 0;
};

// Where one span's (or operation's) time went, on its own thread.
struct SlowSpan {
  std::string name;  // "operation <name>" for an operation
  uint32_t tid = 0;
  uint64_t operation_id = 0;
  uint64_t begin_ns = 0, duration_ns = 0;
  uint64_t user_samples = 0, kernel_samples = 0;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> leaves;  // (pid, leaf address) -> samples
  std::map<std::string, uint64_t> off_cpu_ns;                // by class, after Finish()
  std::map<StackProfile::Key, std::pair<uint32_t, uint64_t>> blocked;  // -> (state, ns)
  std::map<uint32_t, uint64_t> wakers;        // tid -> ns of off-CPU time it ended
  uint64_t runq_ns = 0;
  std::map<uint32_t, uint64_t> ran_instead;   // tid that had the CPU before -> ns waited
};

class ReportModel {
 public:
  explicit ReportModel(ReportFilter filter) : filter_(filter) {}

  void Add(const format::Record& record);
  void AddSymbols(const v1::SymbolTable& table) { stacks_.AddSymbols(table); }
  // After every record and symbol table: classifies off-CPU time.
  void Finish();

  const std::map<uint32_t, ThreadTotals>& threads() const { return threads_; }
  const ThreadDirectory& directory() const { return stacks_.threads(); }
  const std::map<std::string, LatencyHistogram>& spans() const { return spans_; }
  const std::map<std::string, LatencyHistogram>& calls() const { return calls_; }
  const std::map<std::string, uint64_t>& usdt() const { return usdt_; }
  uint64_t first_ns() const { return first_ns_; }
  uint64_t last_ns() const { return last_ns_; }
  uint64_t samples() const { return stacks_.samples(); }
  uint64_t sample_period_ns = 1'000'000'000 / 99;

  std::vector<FunctionCost> TopFunctions(size_t n) const;
  // The slowest spans and operations, slowest first (at most kSlowest).
  static constexpr size_t kSlowest = 5;
  const std::vector<SlowSpan>& slowest() const { return slowest_; }
  std::string FunctionName(uint32_t pid, uint64_t address, bool kernel) const;
  // What a thread was last seen doing: its innermost open span, else its
  // last sampled function.
  std::string Doing(uint32_t tid) const;
  std::vector<NamedFrame> Frames(const StackProfile::Key& key) const {
    return stacks_.StackFrames(key);
  }
  std::vector<BlockingStack> TopBlockingStacks(size_t n) const;

 private:
  bool Wanted(const format::Record& record, uint64_t operation) const;
  void Open(uint32_t tid, uint64_t id, std::string name, uint64_t operation, uint64_t time);
  void Close(uint32_t tid, uint64_t id, uint64_t time);

  ReportFilter filter_;
  StackProfile stacks_;
  std::map<uint32_t, ThreadTotals> threads_;
  // Touched per switch and per span: hash maps, no allocation per event.
  absl::flat_hash_map<uint32_t, uint64_t> switched_in_;  // tid -> time
  absl::flat_hash_map<uint64_t, std::pair<std::string, uint64_t>> open_spans_;  // id -> (name, begin)
  std::map<std::string, LatencyHistogram> spans_;
  std::map<std::string, LatencyHistogram> calls_;
  std::map<std::string, uint64_t> usdt_;
  // Open spans and operations per thread, innermost last (ids of operations
  // are made distinct from span ids by their top bit).
  absl::flat_hash_map<uint32_t, std::vector<std::pair<uint64_t, SlowSpan>>> open_;
  std::vector<SlowSpan> slowest_;
  absl::flat_hash_map<uint32_t, uint32_t> last_off_cpu_;  // cpu -> tid that switched out last
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint64_t>> last_leaf_;  // tid -> (pid, address)
  uint64_t first_ns_ = 0, last_ns_ = 0;
};

// What an off-CPU interval was, from the state at switch-out and the kernel
// stack: "lock wait (futex)", "I/O or pipe wait", "sleep", "page fault",
// "preempted", "blocked (uninterruptible)", "sleeping".
std::string ClassifyOffCpu(uint32_t prev_state, const std::vector<NamedFrame>& kernel_frames);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_REPORT_MODEL_H_
