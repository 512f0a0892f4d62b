#include "daemon/bpf/probe_links.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "daemon/base/credentials.h"
#include "daemon/bpf/skeleton.h"
#include "daemon/bpf/uprobe_multi.h"
#include "probes.skel.h"

namespace loupe::bpf {
namespace {

using ProbesSkeleton = Skeleton<loupe_probes, loupe_probes__open, loupe_probes__load,
                                loupe_probes__attach, loupe_probes__destroy>;

struct LinkFree {
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};

bpf_program* ProgramFor(loupe_probes* skel, probes::ProbeProgram program) {
  using probes::ProbeProgram;
  switch (program) {
    case ProbeProgram::kShimSpanBegin: return skel->progs.handle_shim_span_begin;
    case ProbeProgram::kShimSpanEnd: return skel->progs.handle_shim_span_end;
    case ProbeProgram::kShimInstant: return skel->progs.handle_shim_instant;
    case ProbeProgram::kShimCounter: return skel->progs.handle_shim_counter;
    case ProbeProgram::kShimOperationBegin: return skel->progs.handle_shim_operation_begin;
    case ProbeProgram::kShimOperationEnd: return skel->progs.handle_shim_operation_end;
    case ProbeProgram::kShimOperationPass: return skel->progs.handle_shim_operation_pass;
    case ProbeProgram::kShimThreadName: return skel->progs.handle_shim_thread_name;
    case ProbeProgram::kShimTrigger: return skel->progs.handle_shim_trigger;
    case ProbeProgram::kUsdt: return skel->progs.handle_usdt;
    case ProbeProgram::kUprobeEntry: return skel->progs.handle_uprobe_entry;
    case ProbeProgram::kUprobeReturn: return skel->progs.handle_uprobe_return;
    // A uprobe at a return instruction: the registers are the return's.
    case ProbeProgram::kUprobeReturnSite: return skel->progs.handle_uprobe_return;
    case ProbeProgram::kExceptionCatch: return skel->progs.handle_uprobe_catch;
    case ProbeProgram::kLongjmp: return skel->progs.handle_uprobe_longjmp;
  }
  return nullptr;
}

// Placing or removing a site, the kernel holds the target's mmap_lock for
// write, and a target thread that hits a probe meanwhile sleeps on it
// (find_active_uprobe_rcu). The holder yields inside that section when its
// time slice is up or it woke a target thread (cond_resched in the page
// lookup), and the target's threads then sleep for a time slice, not for
// the few microseconds of the write (2-8 ms per stall in attach_stall.sh).
// A real-time policy for the milliseconds of link creation and removal keeps
// the holder on its CPU; the lowest priority is enough, which an
// RLIMIT_RTPRIO of 1 allows without CAP_SYS_NICE (louped's systemd unit
// grants that). Without either they run as before.
class RealTimeScope {
 public:
  RealTimeScope() {
    if (pthread_getschedparam(pthread_self(), &policy_, &param_) != 0) return;
    const sched_param urgent{.sched_priority = 1};
    raised_ = policy_ == SCHED_OTHER &&
              pthread_setschedparam(pthread_self(), SCHED_FIFO, &urgent) == 0;
  }
  ~RealTimeScope() {
    if (raised_) pthread_setschedparam(pthread_self(), policy_, &param_);
  }
  RealTimeScope(const RealTimeScope&) = delete;
  RealTimeScope& operator=(const RealTimeScope&) = delete;

  bool real_time() const { return raised_ || policy_ == SCHED_FIFO || policy_ == SCHED_RR; }

 private:
  int policy_ = SCHED_OTHER;
  sched_param param_{};
  bool raised_ = false;
};

// Removing a uprobe link ends in a wait for an RCU tasks-trace grace period
// (~16 ms here) per link: closed one after another, a session's 8 shim
// links made every detach wait 130 ms (strace of louped). Closed from a few
// threads, the waits overlap; each thread removes its sites at real-time
// priority as a lone closer would.
constexpr size_t kClosingThreads = 8;

template <typename Link>
void CloseShare(std::vector<Link>& links, size_t first, size_t stride) {
  RealTimeScope urgent;
  for (size_t i = first; i < links.size(); i += stride) links[i] = Link();
}

template <typename Link>
void CloseAll(std::vector<Link> links) {
  if (links.empty()) return;
  const size_t threads = std::min(links.size(), kClosingThreads);
  std::vector<std::thread> closers;
  try {
    closers.reserve(threads - 1);
  } catch (const std::bad_alloc&) {  // no memory for threads either: one closer
    CloseShare(links, 0, 1);
    return;
  }
  for (size_t t = 1; t < threads; ++t) {
    try {
      closers.emplace_back([&links, t, threads] { CloseShare(links, t, threads); });
    } catch (const std::system_error&) {  // no thread to spare: this one closes its share
      CloseShare(links, t, threads);
    }
  }
  CloseShare(links, 0, threads);
  for (std::thread& closer : closers) closer.join();
}

// Each site is placed under the target's mmap_lock held for write, and the
// kernel places a link's sites back to back, retaking the lock at once
// after each. A target thread that needs the lock for write meanwhile (its
// first single-stepped probe hit maps the XOL area; a new thread's stack,
// a large mmap) cannot get it before the rwsem's hand-off timeout, a jiffy:
// 3.8-9.6 ms in attach_stall.sh (bpftrace: __create_xol_area ->
// down_write_killable, arch_uprobe_optimize -> down_write). Links of at most
// kMaxSitesPerLink sites with a pause between them let a waiting writer in
// after one link's holds (0.2-0.6 ms) at the cost of more links to close.
constexpr std::chrono::microseconds kPauseBetweenLinks{100};

class PlacementPacer {
 public:
  void BeforeNextLink() {
    if (placed_any_) std::this_thread::sleep_for(kPauseBetweenLinks);
    placed_any_ = true;
  }

 private:
  bool placed_any_ = false;
};

std::string AttachWarning(const probes::ProbeAttachment& site, std::string_view error) {
  return fmt::format("attach uprobe pid={} {} offset {:#x}: {}", site.pid, site.path,
                     site.file_offset, error);
}

}  // namespace

struct ProbeLinks::Objects {
  std::optional<ProbesSkeleton> skeleton;
  std::vector<std::unique_ptr<bpf_link, LinkFree>> links;  // one per site
  std::vector<ScopedFd> multi_links;                       // one per file, program and pid
  size_t multi_sites = 0;
};

absl::Status ShareSessionMaps(const SessionMaps& session, const SessionMaps& mine) {
  for (auto [own, shared] : {std::pair{mine.events, session.events},
                             std::pair{mine.targets, session.targets},
                             std::pair{mine.counters, session.counters}}) {
    if (int error = bpf_map__reuse_fd(const_cast<bpf_map*>(own), bpf_map__fd(shared));
        error != 0) {
      return absl::InternalError(
          fmt::format("share map {}: {}", bpf_map__name(own), std::strerror(-error)));
    }
  }
  return absl::OkStatus();
}

ProbeLinks::ProbeLinks() : objects_(std::make_unique<Objects>()) {}
ProbeLinks::~ProbeLinks() { Detach(); }

size_t ProbeLinks::attached() const { return objects_->links.size() + objects_->multi_sites; }

void ProbeLinks::StopRecording() {
  if (objects_->skeleton) (*objects_->skeleton)->bss->recording = false;
}

void ProbeLinks::Detach() {
  StopRecording();
  CloseAll(std::exchange(objects_->links, {}));
  CloseAll(std::exchange(objects_->multi_links, {}));
  objects_->multi_sites = 0;
}

// The sites grouped by what one multi link shares: program, file and pid,
// in links of at most kMaxSitesPerLink. A link the kernel refuses is retried
// site by site, so one bad site costs only itself, as with links of one site.
//
// Function entries are linked first, the sites on nops (the shim's, USDT)
// last: x86 kernels (6.18+) turn a probed 5-byte nop into a call on its
// first hit, and the target's thread that hit it takes its own mmap_lock
// for write to do so. Linked while the kernel still places other sites
// (each under that lock for write, taken back at once), that thread waits
// for the rwsem's hand-off, 4-7 ms (attach_stall.sh, bpftrace stacks:
// arch_uprobe_optimize -> down_write, woken by register_for_each_vma).
void ProbeLinks::AttachMulti(const probes::ProbePlan& plan, bool system_wide,
                             std::vector<std::string>* warnings) {
  using probes::ProbeProgram;
  using GroupKey = std::tuple<bool, ProbeProgram, std::string, uint32_t>;
  std::map<GroupKey, std::vector<const probes::ProbeAttachment*>> groups;
  for (const probes::ProbeAttachment& site : plan.attachments) {
    const bool at_nop = site.program != ProbeProgram::kUprobeEntry &&
                        site.program != ProbeProgram::kUprobeReturn &&
                        site.program != ProbeProgram::kUprobeReturnSite &&
                        site.program != ProbeProgram::kExceptionCatch &&
                        site.program != ProbeProgram::kLongjmp;
    groups[{at_nop, site.program, site.path, system_wide ? 0 : site.pid}].push_back(&site);
  }
  auto link = [&](const GroupKey& key, std::span<const probes::ProbeAttachment* const> sites) {
    std::vector<uint64_t> offsets, semaphores, cookies;
    for (const probes::ProbeAttachment* site : sites) {
      offsets.push_back(site->file_offset);
      semaphores.push_back(site->semaphore_offset);
      cookies.push_back(site->cookie);
    }
    const auto& [at_nop, program, path, pid] = key;
    absl::StatusOr<ScopedFd> fd = AttachUprobeMulti(
        bpf_program__fd(ProgramFor(objects_->skeleton->get(), program)),
        {.path = path, .offsets = offsets, .semaphore_offsets = semaphores, .cookies = cookies,
         .pid = pid, .retprobe = program == ProbeProgram::kUprobeReturn});
    if (!fd.ok()) return fd.status();
    objects_->multi_links.push_back(*std::move(fd));
    objects_->multi_sites += sites.size();
    return absl::OkStatus();
  };
  PlacementPacer pacer;
  for (const auto& [key, group] : groups) {
    const std::span<const probes::ProbeAttachment* const> all(group);
    for (size_t first = 0; first < all.size(); first += kMaxSitesPerLink) {
      const auto part = all.subspan(first, std::min(kMaxSitesPerLink, all.size() - first));
      pacer.BeforeNextLink();
      if (link(key, part).ok()) continue;
      for (const probes::ProbeAttachment* site : part) {
        if (absl::Status status = link(key, {&site, 1}); !status.ok()) {
          warnings->push_back(AttachWarning(*site, status.ToString()));
        }
      }
    }
  }
}

void ProbeLinks::AttachEach(const probes::ProbePlan& plan, bool system_wide,
                            std::vector<std::string>* warnings) {
  PlacementPacer pacer;
  for (size_t i = 0; i < plan.attachments.size(); ++i) {
    const probes::ProbeAttachment& site = plan.attachments[i];
    if (i % kMaxSitesPerLink == 0) pacer.BeforeNextLink();
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = site.semaphore_offset,
                .bpf_cookie = site.cookie,
                .retprobe = site.program == probes::ProbeProgram::kUprobeReturn);
    bpf_link* link = bpf_program__attach_uprobe_opts(
        ProgramFor(objects_->skeleton->get(), site.program),
        system_wide ? -1 : static_cast<int>(site.pid), site.path.c_str(), site.file_offset, &opts);
    if (link == nullptr) {
      warnings->push_back(AttachWarning(site, UprobeErrnoText(errno)));
      continue;
    }
    objects_->links.emplace_back(link);
  }
}

absl::StatusOr<std::unique_ptr<ProbeLinks>> ProbeLinks::Attach(const probes::ProbePlan& plan,
                                                               bool system_wide,
                                                               uint32_t usdt_string_cap,
                                                               const SessionMaps& session,
                                                               std::vector<std::string>* warnings) {
  std::unique_ptr<ProbeLinks> links(new ProbeLinks());
  absl::StatusOr<ProbesSkeleton> skel = ProbesSkeleton::Open("probes");
  if (!skel.ok()) return skel.status();
  // A caller's probes per pid also fire in a target that exec'd a program
  // with more rights than its user (sched.bpf.c then dropped it).
  (*skel)->rodata->cfg_filter_targets = system_wide || plan.per_pid;
  (*skel)->rodata->cfg_usdt_string_cap = usdt_string_cap;
  const SessionMaps mine{(*skel)->maps.events, (*skel)->maps.target_tgids, (*skel)->maps.counters};
  if (absl::Status status = ShareSessionMaps(session, mine); !status.ok()) return status;
  const bool multi = UprobeMultiSupported();
  if (multi) {
    bpf_program* program;
    bpf_object__for_each_program(program, (*skel)->obj) {
      bpf_program__set_expected_attach_type(
          program, static_cast<bpf_attach_type>(kUprobeMultiAttachType));
    }
  }
  if (absl::Status status = skel->Load(); !status.ok()) return status;
  for (uint32_t i = 0; i < plan.usdt_specs.size(); ++i) {
    if (bpf_map__update_elem((*skel)->maps.usdt_specs, &i, sizeof i, &plan.usdt_specs[i],
                             sizeof plan.usdt_specs[i], BPF_ANY) != 0) {
      return absl::InternalError(fmt::format("store USDT spec {}: {}", i, std::strerror(errno)));
    }
  }
  // The kernel resolves each path anew (perf_event_open, link creation): as
  // the caller, so a file swapped in since planning is probed only if the
  // caller may read it.
  ScopedFsCredentials as_caller;
  if (absl::Status status = as_caller.Take(plan.credentials); !status.ok()) return status;
  links->objects_->skeleton = *std::move(skel);
  RealTimeScope urgent;
  links->linked_in_real_time_ = urgent.real_time();
  if (multi) {
    links->AttachMulti(plan, system_wide, warnings);
  } else {
    links->AttachEach(plan, system_wide, warnings);
  }
  (*links->objects_->skeleton)->bss->recording = true;  // every site at once
  return links;
}

}  // namespace loupe::bpf
