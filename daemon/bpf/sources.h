// The kernel side of one session: the sched and profile BPF objects loaded
// with their maps shared (one ring buffer, one target map, one set of loss
// counters per session, so sessions never see each other's events), the
// perf events that drive sampling, and the ring buffer they drain into.
#ifndef LOUPE_DAEMON_BPF_SOURCES_H_
#define LOUPE_DAEMON_BPF_SOURCES_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/base/credentials.h"
#include "daemon/bpf/asleep_user_stacks.h"
#include "daemon/bpf/ring_buffer.h"
#include "daemon/bpf/unwind_maps.h"
#include "daemon/probes/probe_plan.h"
#include "shared/records.h"

namespace loupe::bpf {

class ProbeLinks;
struct KernelTexts;
struct WakerContextPath;

enum class SampleEvent { kCpuClock, kCycles };
// How user stacks are walked: from unwind tables compiled from the files'
// CFI (frame pointers only where a file has none), or by frame pointers.
enum class Unwind { kTables, kFramePointers };

struct SourceOptions {
  bool sched = true;  // switches and wakeups (process lifecycle is always on)
  bool cpu = true;    // CPU sampling
  bool shim = true;   // the probes of loupe/loupe.h, wherever the targets have them
  uint32_t sample_hz = 99;
  SampleEvent sample_event = SampleEvent::kCpuClock;
  bool follow_children = false;
  bool offcpu_user_stacks = true;  // stacks of target threads at switch-out
  bool offcpu_kernel_stacks = true;
  // Kernel frames in CPU samples. Kernel addresses defeat KASLR: off for a
  // caller other than root (control/session_options.cc), as
  // kptr_restrict/perf_event_paranoid would deny them to that caller.
  bool cpu_kernel_stacks = true;
  uint32_t ring_bytes = 4 << 20;  // a power of two, at least one page
  // Bytes kept of each USDT string argument; longer strings are cut (and
  // counted as cut, which is not a loss).
  uint32_t usdt_string_cap = LOUPE_USDT_DEFAULT_STRING;
  Unwind unwind = Unwind::kTables;
  // The caller's file rights, for the files whose unwind tables are read
  // (nullopt: louped's own, for root and in-process sessions).
  std::optional<Credentials> credentials;
};

absl::Status ValidateSourceOptions(const SourceOptions& options);

// Cumulative counts from the BPF programs' per-CPU counters.
using BpfCounters = std::array<uint64_t, LOUPE_CNT_MAX>;

class Sources {
 public:
  // Loads, adds `tgids` as targets, then attaches: no event of a target is
  // missed between attach and the target map being filled. Probe sites that
  // cannot be attached end up in warnings().
  static absl::StatusOr<std::unique_ptr<Sources>> Start(const SourceOptions& options,
                                                        const std::vector<uint32_t>& tgids,
                                                        RingBuffer::Handler handler,
                                                        const probes::ProbePlan& plan);
  ~Sources();

  // Serves BPF's requests for unwind tables, then drains the ring.
  absl::StatusOr<size_t> Drain();
  const UnwindMaps::Stats& unwind_stats() const { return unwind_.stats(); }
  BpfCounters ReadCounters() const;
  // Which kernel paths were taken ("sched_tracepoints" -> "tp_btf", ...).
  const std::map<std::string, std::string>& features() const { return features_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  std::vector<std::string> TakeLateWarnings();
  // The user stack of a target thread asleep now (asleep_user_stacks.h).
  std::optional<WalkedStack> AsleepUserStack(uint32_t tgid, uint32_t tid) {
    return asleep_stacks_.Walk(unwind_tables_ ? &unwind_ : nullptr, tgid, tid);
  }
  size_t probe_sites() const;  // uprobes attached
  // The probes' links are for every process (targets filtered in BPF), not per pid.
  bool probes_system_wide() const { return probes_system_wide_; }
  // When the scheduler programs began recording, all at once (CLOCK_MONOTONIC):
  // from then on every switch of a target is in the ring.
  uint64_t recording_since_ns() const { return recording_since_ns_; }
  // Stops new events; what is in the ring can still be drained.
  void Detach();

 private:
  struct Objects;
  Sources();
  // The scheduler object with BTF-typed tracepoints, or raw ones where the
  // kernel lacks those; with the preempt-count programs or without.
  absl::Status LoadSched(const SourceOptions& options, const WakerContextPath& waker);
  absl::Status Load(const SourceOptions& options, bool btf_tracepoints,
                    const WakerContextPath& waker);
  // The sampler is loaded (verified: the slow part) before recording
  // begins, and its perf events opened right after.
  absl::Status LoadSampling(const SourceOptions& options, const KernelTexts& texts);
  absl::Status AttachSampling(const SourceOptions& options);

  std::unique_ptr<Objects> objects_;  // its sampler links own their perf event fds
  std::unique_ptr<RingBuffer> ring_;
  std::unique_ptr<ProbeLinks> probes_;
  UnwindMaps unwind_;
  bool unwind_tables_ = false;
  AsleepUserStacks asleep_stacks_;
  bool probes_system_wide_ = false;
  uint64_t recording_since_ns_ = 0;
  std::vector<std::string> warnings_;
  std::map<std::string, std::string> features_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_SOURCES_H_
