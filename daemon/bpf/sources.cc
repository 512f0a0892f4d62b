#include "daemon/bpf/sources.h"

#include <fmt/format.h>
#include <linux/btf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <future>
#include <optional>
#include <utility>

#include "daemon/base/monotonic_clock.h"
#include "daemon/base/proc_root.h"
#include "daemon/base/status_util.h"
#include "daemon/bpf/kernel_symbol_probe.h"
#include "daemon/bpf/probe_links.h"
#include "daemon/bpf/program_choice.h"
#include "daemon/bpf/skeleton.h"
#include "daemon/symbols/kallsyms_scan.h"
#include "daemon/symbols/kernel_btf_scan.h"
#include "profile.skel.h"
#include "sched.skel.h"

namespace loupe::bpf {

// How bpf/sched.bpf.c's wakeup handlers tell an interrupt's wakeups from a
// task's (ProbeWakerContext).
struct WakerContextPath {
  bool preempt_count = false;
  bool csd_tracepoints = false;
  std::string description;
};

// Kernel text the BPF programs tell apart, found by kallsyms.
struct KernelTexts {
  std::optional<symbols::TextRange> schedule, int3_entry, uprobe_resume;
};

namespace {

using SchedSkeleton = Skeleton<loupe_sched, loupe_sched__open, loupe_sched__load,
                               loupe_sched__attach, loupe_sched__destroy>;
using ProfileSkeleton = Skeleton<loupe_profile, loupe_profile__open, loupe_profile__load,
                                 loupe_profile__attach, loupe_profile__destroy>;

KernelTexts ReadKernelTexts() {
  constexpr std::array<std::string_view, 3> kNames = {"__schedule", "asm_exc_int3",
                                                      "uprobe_notify_resume"};
  const std::vector<std::optional<symbols::TextRange>> ranges =
      symbols::KallsymsFunctionRanges(kNames);
  return {.schedule = ranges[0], .int3_entry = ranges[1], .uprobe_resume = ranges[2]};
}

// Where a breakpoint's handling begins and ends, for the walk of a thread
// stopped at one (unwind.bpf.h, in_breakpoint_window); both objects walk.
template <typename Bss>
void SetBreakpointTexts(Bss* bss, const KernelTexts& texts) {
  if (!texts.int3_entry || !texts.uprobe_resume) return;
  bss->cfg_int3_entry_start = texts.int3_entry->first;
  bss->cfg_int3_entry_end = texts.int3_entry->second;
  bss->cfg_uprobe_resume_start = texts.uprobe_resume->first;
  bss->cfg_uprobe_resume_end = texts.uprobe_resume->second;
}

struct LinkFree {
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};

// One ring, one target map, one set of counters for the whole session.
SessionMaps SessionMapsOf(const loupe_sched* sched) {
  return {sched->maps.events, sched->maps.target_tgids, sched->maps.counters};
}

UnwindMaps::Maps UnwindMapsOf(const loupe_sched* sched) {
  return {sched->maps.unwind_rows, sched->maps.unwind_mappings, sched->maps.unwind_processes,
          sched->maps.unwind_refresh};
}

UnwindMaps::Maps UnwindMapsOf(const loupe_profile* profile) {
  return {profile->maps.unwind_rows, profile->maps.unwind_mappings,
          profile->maps.unwind_processes, profile->maps.unwind_refresh};
}

// The sampler walks the same tables as the switch programs.
absl::Status ShareUnwindMaps(const UnwindMaps::Maps& session, const UnwindMaps::Maps& mine) {
  for (auto [own, shared] : {std::pair{mine.rows, session.rows},
                             std::pair{mine.mappings, session.mappings},
                             std::pair{mine.processes, session.processes},
                             std::pair{mine.refresh, session.refresh}}) {
    if (int error = bpf_map__reuse_fd(own, bpf_map__fd(shared)); error != 0) {
      return absl::InternalError(
          fmt::format("share map {}: {}", bpf_map__name(own), std::strerror(-error)));
    }
  }
  return absl::OkStatus();
}

// The _pcnt programs read the per-CPU preempt count: the kernel must
// describe the variable in BTF (libbpf resolves it there) and the verifier
// must find its address (in kallsyms, which lists variables only with
// CONFIG_KALLSYMS_ALL). Otherwise the irq_depth programs count interrupt
// entries and exits; csd_function (6.3+) only where the kernel has it.
constexpr const char* kPreemptCount = "__preempt_count";

// Why the preempt count cannot be read, or nullopt when it can.
std::optional<std::string> PreemptCountUnreadable() {
  const absl::StatusOr<std::optional<uint32_t>> described =
      symbols::KernelBtfTypeId(kPreemptCount, BTF_KIND_VAR);
  if (!described.ok()) {
    // The sysfs file is the kernel's own BTF, which the verifier checks the
    // variable against: without it the preempt count cannot be read.
    return fmt::format("kernel BTF: {}", MessageOf(described.status()));
  }
  if (!*described) return "no per-CPU preempt count in BTF";
  const absl::StatusOr<bool> resolved = VerifierResolvesKernelSymbol(**described);
  if (!resolved.ok()) return std::string(MessageOf(resolved.status()));
  if (!*resolved) {
    return fmt::format("{} is not in kallsyms: CONFIG_KALLSYMS_ALL is off", kPreemptCount);
  }
  return std::nullopt;
}

WakerContextPath ProbeWakerContext() {
  const std::optional<std::string> unreadable = PreemptCountUnreadable();
  if (!unreadable) return {true, false, fmt::format("preempt_count via {}", kPreemptCount)};
  const absl::StatusOr<std::optional<uint32_t>> csd =
      symbols::KernelBtfTypeId("btf_trace_csd_function_entry", BTF_KIND_TYPEDEF);
  const bool csd_tracepoints = csd.ok() && csd->has_value();
  return {false, csd_tracepoints,
          fmt::format("interrupt tracepoints: irq_handler, softirq{} ({})",
                      csd_tracepoints ? ", csd_function" : "", *unreadable)};
}

}  // namespace

struct Sources::Objects {
  std::optional<SchedSkeleton> sched;
  std::optional<ProfileSkeleton> profile;
  std::vector<std::unique_ptr<bpf_link, LinkFree>> sample_links;
};

absl::Status ValidateSourceOptions(const SourceOptions& o) {
  if (o.sample_hz < 1 || o.sample_hz > 10'000) {
    return absl::InvalidArgumentError(
        fmt::format("sample_hz = {} is out of range: 1 .. 10000", o.sample_hz));
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (o.ring_bytes < static_cast<uint32_t>(page) || (o.ring_bytes & (o.ring_bytes - 1)) != 0 ||
      o.ring_bytes > (1u << 30)) {
    return absl::InvalidArgumentError(
        fmt::format("ring_buffer_size = {} must be a power of two from {} (one page) to 1 GiB",
                    o.ring_bytes, page));
  }
  if (o.usdt_string_cap < 16 || o.usdt_string_cap > LOUPE_USDT_MAX_STRING) {
    return absl::InvalidArgumentError(fmt::format(
        "string_cap = {} is out of range: 16 .. {}", o.usdt_string_cap, LOUPE_USDT_MAX_STRING));
  }
  return absl::OkStatus();
}

Sources::Sources() : objects_(std::make_unique<Objects>()) {}

Sources::~Sources() {
  ring_.reset();  // before the maps it reads
  Detach();
}

absl::Status Sources::LoadSched(const SourceOptions& options, const WakerContextPath& waker) {
  absl::Status loaded = Load(options, /*btf_tracepoints=*/true, waker);
  features_["sched_tracepoints"] = "tp_btf";
  if (!loaded.ok() && loaded.code() != absl::StatusCode::kPermissionDenied) {
    loaded = Load(options, /*btf_tracepoints=*/false, waker);
    features_["sched_tracepoints"] = "raw_tp (tp_btf unavailable)";
  }
  return loaded;
}

absl::Status Sources::Load(const SourceOptions& options, bool btf_tracepoints,
                           const WakerContextPath& waker) {
  objects_->sched.reset();
  absl::StatusOr<SchedSkeleton> sched = SchedSkeleton::Open("sched");
  if (!sched.ok()) return sched.status();
  (*sched)->rodata->cfg_follow_children = options.follow_children;
  if (options.credentials && !options.credentials->root()) {
    (*sched)->rodata->cfg_plain_user_only = true;
    (*sched)->rodata->cfg_caller_uid = options.credentials->uid;
  }
  (*sched)->rodata->cfg_offcpu_user_stacks = options.offcpu_user_stacks;
  (*sched)->rodata->cfg_offcpu_kernel_stacks = options.offcpu_kernel_stacks;
  (*sched)->rodata->cfg_unwind_tables = unwind_tables_;
  bpf_map__set_max_entries((*sched)->maps.unwind_rows,
                           unwind_tables_ ? unwind_.rows_to_reserve(options.follow_children) : 1);
  bpf_map__set_max_entries((*sched)->maps.events, options.ring_bytes);
  bpf_map__set_max_entries((*sched)->maps.runnable_targets, libbpf_num_possible_cpus());
  const ProgramChoice choice{.btf_tracepoints = btf_tracepoints,
                             .preempt_count = waker.preempt_count,
                             .csd_tracepoints = waker.csd_tracepoints,
                             .sched = options.sched};
  bpf_program* program;
  bpf_object__for_each_program(program, (*sched)->obj) {
    bpf_program__set_autoload(program, LoadsProgram(bpf_program__name(program), choice));
  }
  if (absl::Status status = sched->Load(); !status.ok()) return status;
  objects_->sched = *std::move(sched);
  return absl::OkStatus();
}

absl::Status Sources::LoadSampling(const SourceOptions& options, const KernelTexts& texts) {
  absl::StatusOr<ProfileSkeleton> profile = ProfileSkeleton::Open("profile");
  if (!profile.ok()) return profile.status();
  (*profile)->rodata->cfg_kernel_stacks = options.cpu_kernel_stacks;
  (*profile)->rodata->cfg_unwind_tables = unwind_tables_;
  if (absl::Status status =
          ShareUnwindMaps(UnwindMapsOf(objects_->sched->get()), UnwindMapsOf(profile->get()));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = ShareSessionMaps(SessionMapsOf(objects_->sched->get()),
                                              {(*profile)->maps.events,
                                               (*profile)->maps.target_tgids,
                                               (*profile)->maps.counters});
      !status.ok()) {
    return status;
  }
  if (absl::Status status = profile->Load(); !status.ok()) return status;
  SetBreakpointTexts((*profile)->bss, texts);
  objects_->profile = *std::move(profile);
  return absl::OkStatus();
}

absl::Status Sources::AttachSampling(const SourceOptions& options) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  if (options.sample_event == SampleEvent::kCpuClock) {
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = 1'000'000'000 / options.sample_hz;  // cpu-clock counts nanoseconds
  } else {
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.freq = 1;
    attr.sample_freq = options.sample_hz;
  }
  const int cpus = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < cpus; ++cpu) {
    ScopedFd fd(
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!fd.valid()) {
      if (errno == ENODEV) continue;  // an offline cpu
      const int error = errno;
      if (options.sample_event == SampleEvent::kCycles &&
          (error == ENOENT || error == EOPNOTSUPP)) {
        return absl::FailedPreconditionError(
            "sample event 'cycles' needs a hardware PMU, which this machine does not have; "
            "use cpu-clock");
      }
      return absl::Status(
          error == EACCES || error == EPERM ? absl::StatusCode::kPermissionDenied
                                            : absl::StatusCode::kInternal,
          fmt::format("perf_event_open cpu {}: {} (needs CAP_PERFMON)", cpu, std::strerror(error)));
    }
    bpf_link* link =
        bpf_program__attach_perf_event((*objects_->profile)->progs.handle_cpu_sample, fd.get());
    if (link == nullptr) {
      return absl::InternalError(
          fmt::format("attach sampler to cpu {}: {}", cpu, std::strerror(errno)));
    }
    // The link owns the perf event from here on: destroying it closes the
    // fd, so ours must not close it again (in a threaded daemon the number
    // may meanwhile name another thread's file).
    fd.Release();
    objects_->sample_links.emplace_back(link);
  }
  features_["sample_event"] = options.sample_event == SampleEvent::kCpuClock
                                  ? fmt::format("cpu-clock period {} ns", attr.sample_period)
                                  : fmt::format("cycles at {} Hz", options.sample_hz);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Sources>> Sources::Start(const SourceOptions& options,
                                                        const std::vector<uint32_t>& tgids,
                                                        RingBuffer::Handler handler,
                                                        const probes::ProbePlan& plan) {
  if (absl::Status status = ValidateSourceOptions(options); !status.ok()) return status;
  std::unique_ptr<Sources> sources(new Sources());
  sources->unwind_tables_ = options.unwind == Unwind::kTables &&
                            (options.cpu || (options.sched && options.offcpu_user_stacks));
  // kallsyms (formatted anew by the kernel for each reader: 50-75 ms) is
  // read while the unwind tables are compiled and the programs load: only
  // the attach needs it.
  std::future<KernelTexts> kernel_texts = std::async(std::launch::async, ReadKernelTexts);
  if (sources->unwind_tables_) {
    sources->unwind_.set_credentials(options.credentials);
    sources->unwind_.Prepare(tgids);
  }
  const WakerContextPath waker_context = ProbeWakerContext();
  if (absl::Status loaded = sources->LoadSched(options, waker_context);
      !loaded.ok()) {
    return loaded;
  }
  const KernelTexts texts = kernel_texts.get();
  if (texts.schedule && options.sched && options.offcpu_kernel_stacks) {
    // Kernel stacks at switch-out start in __schedule: the frames before
    // it are the tracer's. Without kallsyms they are kept (and shown).
    loupe_sched* sched = sources->objects_->sched->get();
    sched->bss->cfg_schedule_start = texts.schedule->first;
    sched->bss->cfg_schedule_end = texts.schedule->second;
  }
  SetBreakpointTexts(sources->objects_->sched->get()->bss, texts);

  const uint8_t yes = 1;
  for (uint32_t tgid : tgids) {
    if (bpf_map__update_elem(sources->objects_->sched->get()->maps.target_tgids, &tgid, sizeof tgid,
                             &yes, sizeof yes, BPF_ANY) != 0) {
      return absl::ResourceExhaustedError(
          fmt::format("add target {}: {}", tgid, std::strerror(errno)));
    }
  }
  if (sources->unwind_tables_) {
    if (absl::Status status =
            sources->unwind_.Start(UnwindMapsOf(sources->objects_->sched->get()), tgids);
        !status.ok()) {
      return status;
    }
    const UnwindMaps::Stats& unwind = sources->unwind_.stats();
    sources->features_["user_stacks"] = fmt::format(
        "unwind tables: {} files, {} rows of {} ({} files by frame pointers)", unwind.files,
        unwind.rows, unwind.capacity, unwind.files_without);
    for (std::string& note : sources->unwind_.TakeNotes()) sources->warnings_.push_back(note);
  } else {
    sources->features_["user_stacks"] = "frame pointers";
  }
  absl::StatusOr<std::unique_ptr<RingBuffer>> ring = RingBuffer::Create(
      bpf_map__fd(sources->objects_->sched->get()->maps.events), std::move(handler));
  if (!ring.ok()) return ring.status();
  sources->ring_ = *std::move(ring);

  if (options.cpu) {
    if (absl::Status status = sources->LoadSampling(options, texts); !status.ok()) return status;
  }
  // Loaded now, not when first asked for: threads asleep when recording
  // begins are read right after, before they may wake.
  if (options.sched && options.offcpu_user_stacks) sources->asleep_stacks_.Prepare();

  loupe_sched* sched = sources->objects_->sched->get();
  sched->data->recording = false;
  if (absl::Status status = sources->objects_->sched->Attach(); !status.ok()) return status;
  // Read before the flag is set: every record's time is later.
  sources->recording_since_ns_ = MonotonicNs();
  sched->data->recording = true;
  if (options.cpu) {
    if (absl::Status status = sources->AttachSampling(options); !status.ok()) return status;
  }
  if (options.sched) {
    sources->features_["waker_context"] = waker_context.description;
    sources->features_["cpu_holders"] = "switches recorded while a target waits";
  }
  sources->features_["follow_children"] = options.follow_children ? "in BPF on fork" : "off";
  if (!plan.attachments.empty()) {
    // perf_event_open takes pids as louped's namespace numbers them; when
    // targets are known only by global pid, attach everywhere and filter.
    // Never for a plan made per pid (a caller that is not root).
    const bool system_wide = !plan.per_pid && (options.follow_children || !PidsAreLocal());
    sources->probes_system_wide_ = system_wide;
    absl::StatusOr<std::unique_ptr<ProbeLinks>> links =
        ProbeLinks::Attach(plan, system_wide, options.usdt_string_cap,
                           SessionMapsOf(sources->objects_->sched->get()), &sources->warnings_);
    if (!links.ok()) return links.status();
    sources->probes_ = *std::move(links);
    sources->features_["uprobes"] = fmt::format(
        "{} of {} sites attached{}, {}", sources->probes_->attached(), plan.attachments.size(),
        system_wide ? " in every process, targets filtered in BPF" : "",
        sources->probes_->linked_in_real_time()
            ? "placed at real-time priority"
            : "placed at normal priority (neither CAP_SYS_NICE nor an RLIMIT_RTPRIO of 1: the "
              "target's threads may wait a time slice on its mmap_lock while a site is placed "
              "or removed)");
  }
  return sources;
}

absl::StatusOr<size_t> Sources::Drain() {
  if (unwind_tables_) unwind_.Poll(MonotonicNs());
  return ring_->Drain();
}

BpfCounters Sources::ReadCounters() const {
  BpfCounters totals{};
  if (!objects_->sched) return totals;
  std::vector<uint64_t> per_cpu(libbpf_num_possible_cpus());
  for (uint32_t key = 0; key < LOUPE_CNT_MAX; ++key) {
    if (bpf_map__lookup_elem(objects_->sched->get()->maps.counters, &key, sizeof key,
                             per_cpu.data(), per_cpu.size() * sizeof(uint64_t), 0) == 0) {
      for (uint64_t v : per_cpu) totals[key] += v;
    }
  }
  return totals;
}

size_t Sources::probe_sites() const { return probes_ ? probes_->attached() : 0; }

std::vector<std::string> Sources::TakeLateWarnings() {
  std::vector<std::string> notes = unwind_.TakeNotes();
  for (std::string& note : asleep_stacks_.TakeNotes()) notes.push_back(std::move(note));
  return notes;
}

void Sources::Detach() {
  // Every source stops recording before the scheduler programs go: a
  // thread's own records after its last recorded switch would contradict
  // it (it ran, yet no switch-in says when). Unregistering uprobes can
  // take the kernel most of a second, so the probes stop by their flag
  // first and are unregistered last, when nothing is recorded any more.
  if (probes_) probes_->StopRecording();
  objects_->sample_links.clear();  // closes the perf events too
  if (objects_->sched) {
    // All at once: detached one by one, wakeups would outlive switches.
    objects_->sched->get()->data->recording = false;
    // Detaching the programs while keeping the maps: the ring can still be drained.
    loupe_sched__detach(objects_->sched->get());
  }
  if (probes_) probes_->Detach();  // the kernel lowers the USDT semaphores
}

}  // namespace loupe::bpf
