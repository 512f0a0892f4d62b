#include "daemon/control/session_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daemon/bpf/source_names.h"
#include "daemon/base/credentials.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/content_policy.h"

namespace loupe::control {
namespace {

absl::Status ApplySources(const v1::AttachRequest& request, bpf::SourceOptions* sources) {
  const std::vector<std::string> names(request.sources().begin(), request.sources().end());
  for (absl::Status status : {bpf::ParseSources(names, sources),
                              bpf::ParseSampleEvent(request.sample_event(), sources),
                              bpf::ParseOffCpuStacks(request.offcpu_stacks(), sources),
                              bpf::ParseUnwind(request.unwind(), sources)}) {
    if (!status.ok()) return status;
  }
  if (request.sample_hz() != 0) sources->sample_hz = request.sample_hz();
  if (request.ring_buffer_size() != 0) sources->ring_bytes = request.ring_buffer_size();
  if (request.string_cap() != 0) sources->usdt_string_cap = request.string_cap();
  sources->follow_children = request.follow_children();
  return absl::OkStatus();
}

// Where the segments go, and as whom they are written.
absl::Status ApplyOutput(const v1::AttachRequest& request, const AttachCaller& caller,
                         format::WriterOptions* writer) {
  writer->session_id = request.session_id();
  if (request.output_dir().empty()) return absl::OkStatus();
  // Whether the caller may write there is for the writer to find out, as
  // the caller (writer->credentials): a check here with louped's own
  // rights would answer for the wrong user.
  writer->directory = request.output_dir();
  return absl::OkStatus();
}

// The caller's file rights, for everything louped opens or creates for it
// (segments, probed ELF files). Root, or the session runs in the caller's
// own process: the rights in force are the caller's already.
std::optional<Credentials> CallerFileRights(const AttachCaller& caller) {
  if (caller.in_process || caller.uid == 0) return std::nullopt;
  return PeerCredentialsOf(static_cast<pid_t>(caller.pid), caller.uid, caller.gid);
}

// What louped grants a caller other than root of its own resources and of
// the kernel's secrets. In tracectl's embedded mode the session runs with
// the caller's own privileges, so nothing is withheld.
absl::Status LimitUnprivileged(const session::SessionOptions& defaults,
                               const v1::AttachRequest& request, const AttachCaller& caller,
                               session::SessionOptions* options) {
  if (caller.in_process || caller.uid == 0) return absl::OkStatus();
  // The ring is locked kernel memory: no larger than louped's own setting.
  if (options->sources.ring_bytes > defaults.sources.ring_bytes) {
    return absl::PermissionDeniedError(fmt::format(
        "ring_buffer_size = {} is above louped's ring_buffer_size = {}, the most a caller other "
        "than root (uid {}) may ask for",
        request.ring_buffer_size(), defaults.sources.ring_bytes, caller.uid));
  }
  // Kernel addresses defeat KASLR; kptr_restrict and perf_event_paranoid
  // would deny them to this caller, so louped does not hand them out either.
  std::vector<std::string> dropped;
  if (options->sources.offcpu_kernel_stacks) dropped.push_back("off-CPU");
  if (options->sources.cpu && options->sources.cpu_kernel_stacks) dropped.push_back("CPU sample");
  options->sources.offcpu_kernel_stacks = false;
  options->sources.cpu_kernel_stacks = false;
  if (!dropped.empty()) {
    options->notes.push_back(fmt::format(
        "kernel stacks are off for a caller other than root (uid {}): {} stacks keep only their "
        "user frames (kernel addresses would reveal the kernel's layout)",
        caller.uid, fmt::join(dropped, " and ")));
  }
  return absl::OkStatus();
}

}  // namespace

session::SessionOptions EmbeddedDefaults() {
  session::SessionOptions defaults;
  defaults.writer.directory = "loupe-traces";
  return defaults;
}

absl::StatusOr<session::SessionOptions> BuildSessionOptions(const session::SessionOptions& defaults,
                                                            const v1::AttachRequest& request,
                                                            const AttachCaller& caller) {
  session::SessionOptions options = defaults;
  options.pids.assign(request.pids().begin(), request.pids().end());
  options.caller_pid = caller.pid;
  options.caller_uid = caller.uid;
  if (absl::Status status = ApplySources(request, &options.sources); !status.ok()) return status;
  if (absl::Status status = LimitUnprivileged(defaults, request, caller, &options); !status.ok()) {
    return status;
  }
  const std::vector<std::string> usdt(request.usdt().begin(), request.usdt().end());
  const std::vector<std::string> uprobes(request.uprobes().begin(), request.uprobes().end());
  if (absl::Status status = probes::ParseProbeRequests(usdt, uprobes, &options.probes);
      !status.ok()) {
    return status;
  }
  options.probes.credentials = options.writer.credentials = options.sources.credentials =
      CallerFileRights(caller);
  if (!request.content_policy().empty()) {
    absl::StatusOr<session::ContentPolicy> policy =
        session::ParseContentPolicy(request.content_policy());
    if (!policy.ok()) return policy.status();
    options.content_policy = *policy;
  }
  if (request.duration_ms() > UINT64_MAX / 1'000'000) {
    return absl::InvalidArgumentError(
        fmt::format("duration_ms = {} is out of range", request.duration_ms()));
  }
  options.duration_ns = request.duration_ms() * 1'000'000;
  if (absl::Status status = ApplyOutput(request, caller, &options.writer); !status.ok()) {
    return status;
  }
  if (absl::Status status = session::ValidateSessionOptions(options); !status.ok()) return status;
  return options;
}

}  // namespace loupe::control
