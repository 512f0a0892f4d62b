#include "daemon/control/session_manager.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include "daemon/bpf/source_names.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/content_policy.h"

namespace loupe::control {
namespace {

constexpr size_t kMaxEndedSessions = 64;

}  // namespace

absl::StatusOr<session::SessionOptions> SessionManager::OptionsFor(
    const v1::AttachRequest& request, const PeerCredentials& caller) const {
  session::SessionOptions options = defaults_;
  options.pids.assign(request.pids().begin(), request.pids().end());
  options.caller_pid = static_cast<uint32_t>(caller.pid);
  options.caller_uid = caller.uid;
  const std::vector<std::string> sources(request.sources().begin(), request.sources().end());
  for (absl::Status status : {bpf::ParseSources(sources, &options.sources),
                              bpf::ParseSampleEvent(request.sample_event(), &options.sources),
                              bpf::ParseOffCpuStacks(request.offcpu_stacks(), &options.sources)}) {
    if (!status.ok()) return status;
  }
  if (request.sample_hz() != 0) options.sources.sample_hz = request.sample_hz();
  if (request.ring_buffer_size() != 0) options.sources.ring_bytes = request.ring_buffer_size();
  options.sources.follow_children = request.follow_children();
  const std::vector<std::string> usdt(request.usdt().begin(), request.usdt().end());
  const std::vector<std::string> uprobes(request.uprobes().begin(), request.uprobes().end());
  if (absl::Status status = probes::ParseProbeRequests(usdt, uprobes, &options.probes);
      !status.ok()) {
    return status;
  }
  if (!request.content_policy().empty()) {
    absl::StatusOr<session::ContentPolicy> policy =
        session::ParseContentPolicy(request.content_policy());
    if (!policy.ok()) return policy.status();
    options.content_policy = *policy;
  }
  options.duration_ns = request.duration_ms() * 1'000'000;
  if (!request.output_dir().empty()) {
    // A non-root caller's files land where the caller could write itself.
    if (caller.uid != 0 && access(request.output_dir().c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(
          fmt::format("output_dir {}: louped writes only to directories the caller may write to",
                      request.output_dir()));
    }
    options.writer.directory = request.output_dir();
  }
  return options;
}

absl::StatusOr<v1::AttachResponse> SessionManager::Attach(const v1::AttachRequest& request,
                                                          const PeerCredentials& caller) {
  absl::StatusOr<session::SessionOptions> options = OptionsFor(request, caller);
  if (!options.ok()) return options.status();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!request.session_id().empty()) {
    if (sessions_.contains(request.session_id())) {
      return absl::AlreadyExistsError(
          fmt::format("a session named {} exists already", request.session_id()));
    }
    options->writer.session_id = request.session_id();
  } else {
    options->writer.session_id =
        fmt::format("s{}-{}", static_cast<uint64_t>(time(nullptr)), next_id_++);
  }
  absl::StatusOr<std::unique_ptr<session::Session>> started =
      session::Session::Start(*options, log_);
  if (!started.ok()) return started.status();

  v1::AttachResponse response;
  response.set_session_id(options->writer.session_id);
  response.set_output_dir(options->writer.directory);
  const session::SessionStats stats = (*started)->stats();
  for (uint32_t pid : stats.targets) response.add_global_pids(pid);
  for (const std::string& warning : stats.warnings) response.add_warnings(warning);
  response.set_probe_sites(stats.probe_sites);
  log_->info("session {}: attached for uid {} (pid {})", response.session_id(), caller.uid,
             caller.pid);
  sessions_[response.session_id()] = {*std::move(started), caller.uid};

  // Keep the list bounded: forget the oldest ended sessions.
  size_t ended = 0;
  for (const auto& [id, entry] : sessions_) ended += !entry.session->stats().running;
  for (auto it = sessions_.begin(); ended > kMaxEndedSessions && it != sessions_.end();) {
    if (!it->second.session->stats().running) {
      it = sessions_.erase(it);
      --ended;
    } else {
      ++it;
    }
  }
  return response;
}

absl::Status SessionManager::CheckOwner(const Entry& entry, const std::string& id,
                                        const PeerCredentials& caller) const {
  if (caller.uid == 0 || caller.uid == entry.owner) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("session {} belongs to uid {}, not to uid {}", id, entry.owner, caller.uid));
}

absl::StatusOr<v1::SessionStatus> SessionManager::Detach(const std::string& id,
                                                         const PeerCredentials& caller) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(fmt::format("no session {}", id));
  if (absl::Status status = CheckOwner(it->second, id, caller); !status.ok()) return status;
  absl::Status stopped = it->second.session->Stop();
  v1::SessionStatus status = ToProto(it->second.session->stats(), it->second.owner);
  if (!stopped.ok()) return stopped;
  log_->info("session {}: detached by uid {}", id, caller.uid);
  return status;
}

absl::StatusOr<std::vector<v1::SessionStatus>> SessionManager::Status(
    const std::string& id, const PeerCredentials& caller) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<v1::SessionStatus> out;
  for (const auto& [name, entry] : sessions_) {
    if (!id.empty() && name != id) continue;
    if (!id.empty()) {
      if (absl::Status status = CheckOwner(entry, name, caller); !status.ok()) return status;
    } else if (caller.uid != 0 && caller.uid != entry.owner) {
      continue;  // others' sessions are not listed
    }
    out.push_back(ToProto(entry.session->stats(), entry.owner));
  }
  if (!id.empty() && out.empty()) return absl::NotFoundError(fmt::format("no session {}", id));
  return out;
}

void SessionManager::StopAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, entry] : sessions_) {
    if (absl::Status status = entry.session->Stop(); !status.ok()) {
      log_->error("session {}: {}", id, status.ToString());
    }
  }
}

v1::SessionStatus SessionManager::ToProto(const session::SessionStats& stats, uid_t owner) {
  v1::SessionStatus status;
  status.set_session_id(stats.id);
  status.set_running(stats.running);
  status.set_owner_uid(owner);
  status.set_output_dir(stats.directory);
  for (uint32_t pid : stats.targets) status.add_targets(pid);
  status.set_events(stats.events);
  for (const auto& [kind, count] : stats.events_by_kind)
    (*status.mutable_events_by_kind())[kind] = count;
  for (const auto& [what, count] : stats.losses) (*status.mutable_losses())[what] = count;
  status.set_bytes_written(stats.bytes_written);
  status.set_segments(stats.segments);
  status.set_last_error(stats.last_error);
  for (const std::string& warning : stats.warnings) status.add_warnings(warning);
  status.set_probe_sites(stats.probe_sites);
  return status;
}

}  // namespace loupe::control
