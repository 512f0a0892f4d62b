#include "daemon/bpf/probe_links.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "daemon/base/credentials.h"
#include "daemon/bpf/skeleton.h"
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
    case ProbeProgram::kShimThreadName: return skel->progs.handle_shim_thread_name;
    case ProbeProgram::kShimTrigger: return skel->progs.handle_shim_trigger;
    case ProbeProgram::kUsdt: return skel->progs.handle_usdt;
    case ProbeProgram::kUprobeEntry: return skel->progs.handle_uprobe_entry;
    case ProbeProgram::kUprobeReturn: return skel->progs.handle_uprobe_return;
  }
  return nullptr;
}

}  // namespace

struct ProbeLinks::Objects {
  std::optional<ProbesSkeleton> skeleton;
  std::vector<std::unique_ptr<bpf_link, LinkFree>> links;
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

size_t ProbeLinks::attached() const { return objects_->links.size(); }

void ProbeLinks::Detach() {
  if (objects_->skeleton) (*objects_->skeleton)->bss->recording = false;
  objects_->links.clear();
}

absl::StatusOr<std::unique_ptr<ProbeLinks>> ProbeLinks::Attach(const probes::ProbePlan& plan,
                                                               bool system_wide,
                                                               uint32_t usdt_string_cap,
                                                               const SessionMaps& session,
                                                               std::vector<std::string>* warnings) {
  std::unique_ptr<ProbeLinks> links(new ProbeLinks());
  absl::StatusOr<ProbesSkeleton> skel = ProbesSkeleton::Open("probes");
  if (!skel.ok()) return skel.status();
  (*skel)->rodata->cfg_filter_targets = system_wide;
  (*skel)->rodata->cfg_usdt_string_cap = usdt_string_cap;
  const SessionMaps mine{(*skel)->maps.events, (*skel)->maps.target_tgids, (*skel)->maps.counters};
  if (absl::Status status = ShareSessionMaps(session, mine); !status.ok()) return status;
  if (absl::Status status = skel->Load(); !status.ok()) return status;
  for (uint32_t i = 0; i < plan.usdt_specs.size(); ++i) {
    if (bpf_map__update_elem((*skel)->maps.usdt_specs, &i, sizeof i, &plan.usdt_specs[i],
                             sizeof plan.usdt_specs[i], BPF_ANY) != 0) {
      return absl::InternalError(fmt::format("store USDT spec {}: {}", i, std::strerror(errno)));
    }
  }
  // perf_event_open resolves each path anew: as the caller, so a file
  // swapped in since planning is probed only if the caller may read it.
  ScopedFsCredentials as_caller;
  if (absl::Status status = as_caller.Take(plan.credentials); !status.ok()) return status;
  for (const probes::ProbeAttachment& site : plan.attachments) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = site.semaphore_offset,
                .bpf_cookie = site.cookie,
                .retprobe = site.program == probes::ProbeProgram::kUprobeReturn);
    bpf_link* link = bpf_program__attach_uprobe_opts(
        ProgramFor(skel->get(), site.program), system_wide ? -1 : static_cast<int>(site.pid),
        site.path.c_str(), site.file_offset, &opts);
    if (link == nullptr) {
      warnings->push_back(fmt::format("attach uprobe pid={} {} offset {:#x}: {}", site.pid,
                                      site.path, site.file_offset, std::strerror(errno)));
      continue;
    }
    links->objects_->links.emplace_back(link);
  }
  (*skel)->bss->recording = true;  // every site at once
  links->objects_->skeleton = *std::move(skel);
  return links;
}

}  // namespace loupe::bpf
