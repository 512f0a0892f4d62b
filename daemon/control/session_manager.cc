#include "daemon/control/session_manager.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/base/status_util.h"
#include "daemon/base/utf8.h"
#include "daemon/control/session_options.h"

namespace loupe::control {
namespace {

class EngineSession final : public ManagedSession {
 public:
  explicit EngineSession(std::unique_ptr<session::Session> session)
      : session_(std::move(session)) {}
  absl::Status Stop(Deadline deadline) override { return session_->Stop(deadline); }
  void Hurry(Deadline deadline) override { session_->Hurry(deadline); }
  bool Finished() override { return session_->WaitFinished(0); }
  session::SessionStats stats() const override { return session_->stats(); }

 private:
  std::unique_ptr<session::Session> session_;
};

}  // namespace

SessionStarter EngineSessions(std::shared_ptr<spdlog::logger> log) {
  return [log](session::SessionOptions options)
             -> absl::StatusOr<std::unique_ptr<ManagedSession>> {
    absl::StatusOr<std::unique_ptr<session::Session>> started =
        session::Session::Start(std::move(options), log);
    if (!started.ok()) return started.status();
    return std::make_unique<EngineSession>(*std::move(started));
  };
}

SessionManager::SessionManager(SessionManagerOptions options, std::shared_ptr<spdlog::logger> log,
                               SessionStarter starter)
    : options_(std::move(options)),
      log_(std::move(log)),
      starter_(starter ? std::move(starter) : EngineSessions(log_)) {
  reaper_ = std::thread([this] { Reap(); });
}

SessionManager::~SessionManager() {
  StopAll();
  if (reaper_.joinable()) reaper_.join();
}

absl::StatusOr<v1::AttachResponse> SessionManager::Attach(const v1::AttachRequest& request,
                                                          const PeerCredentials& caller) {
  // The name is reserved under the lock; the session starts outside it.
  std::string id = request.session_id();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutting_down_) return absl::UnavailableError("louped is shutting down");
    // Unique across louped's restarts (its pid) and clock steps too: a
    // session's id may not name files an earlier run left in the folder.
    if (id.empty()) {
      id = fmt::format("s{}-{}-{}", static_cast<uint64_t>(time(nullptr)), getpid(), next_id_++);
    }
    if (sessions_.contains(id)) {
      return absl::AlreadyExistsError(fmt::format("a session named {} exists already", id));
    }
    if (absl::Status status = CheckSessionLimit(caller); !status.ok()) return status;
    const uint64_t connection = request.detached() ? 0 : caller.connection;
    // The client hung up before this call got here: its session would
    // never be orphaned (that news came and went), so it is not started.
    if (connection != 0 && closed_.contains(connection)) {
      return absl::UnavailableError(
          "the client's connection closed before its session could start; not starting it");
    }
    Entry& entry = sessions_[id];
    entry.owner = caller.uid;
    entry.connection = connection;
  }
  auto forget = [this, &id] {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions_.erase(id);
    changed_.notify_all();
  };

  v1::AttachRequest named = request;
  named.set_session_id(id);
  absl::StatusOr<session::SessionOptions> options = BuildSessionOptions(
      options_.defaults, named,
      {.pid = static_cast<uint32_t>(caller.pid), .uid = caller.uid, .gid = caller.gid});
  if (!options.ok()) {
    forget();
    return options.status();
  }
  absl::StatusOr<std::unique_ptr<ManagedSession>> started = starter_(*std::move(options));
  if (!started.ok()) {
    forget();
    return started.status();
  }
  std::shared_ptr<ManagedSession> session = *std::move(started);
  const session::SessionStats stats = session->stats();
  bool end_now = false;
  ManagedSession::Deadline deadline = ManagedSession::Deadline::max();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = sessions_.at(id);
    entry.session = session;
    entry.state = State::kRunning;
    end_now = shutting_down_ || entry.orphaned;
    deadline = shutdown_deadline_;
  }
  log_->info("session {}: attached for uid {} (pid {}){}", id, caller.uid, caller.pid,
             request.detached() ? ", detached from its client" : "");
  if (end_now) {
    // Shutdown began, or the client went away, while it started.
    absl::StatusOr<Ended> ended = End(id, "its start outlived its client or louped", deadline);
    return absl::UnavailableError(
        fmt::format("session {}: ended as soon as it started (louped is shutting down, or the "
                    "client went away){}",
                    id, ended.ok() ? "" : ": " + std::string(MessageOf(ended.status()))));
  }

  v1::AttachResponse response;
  response.set_session_id(id);
  response.set_output_dir(Utf8Text(stats.directory));
  for (uint32_t pid : stats.targets) response.add_global_pids(pid);
  for (const std::string& warning : stats.warnings) response.add_warnings(Utf8Text(warning));
  response.set_probe_sites(stats.probe_sites);
  return response;
}

absl::Status SessionManager::CheckSessionLimit(const PeerCredentials& caller) const {
  if (caller.uid == 0) return absl::OkStatus();
  size_t owned = 0;
  for (const auto& [id, entry] : sessions_) {
    owned += entry.owner == caller.uid && entry.state != State::kEnded;
  }
  if (owned < options_.max_sessions_per_user) return absl::OkStatus();
  return absl::ResourceExhaustedError(fmt::format(
      "uid {} has {} sessions already, louped's max_sessions_per_user; detach one first",
      caller.uid, owned));
}

absl::StatusOr<SessionManager::Ended> SessionManager::End(const std::string& id,
                                                          std::string_view why,
                                                          ManagedSession::Deadline deadline) {
  std::shared_ptr<ManagedSession> session;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      auto it = sessions_.find(id);
      if (it == sessions_.end()) return absl::NotFoundError(fmt::format("no session {}", id));
      Entry& entry = it->second;
      if (entry.state == State::kEnded) {
        return Ended{entry.final_stats, entry.final_status, entry.owner};
      }
      if (entry.state == State::kStarting) {
        return absl::UnavailableError(fmt::format("session {} is still starting", id));
      }
      if (entry.state == State::kRunning) {
        entry.state = State::kStopping;
        session = entry.session;
        break;
      }
      // Another caller is stopping it: no later than this one may wait.
      if (entry.session) entry.session->Hurry(deadline);
      changed_.wait(lock);
    }
  }
  log_->info("session {}: ending ({})", id, why);
  const absl::Status stopped = session->Stop(deadline);
  Ended ended{session->stats(), stopped};
  // Stopped from here rather than ending by itself: the caller watching it
  // and `status` say why ("louped is stopping", "detached by uid 0").
  if (ended.stats.ended_because.empty()) ended.stats.ended_because = why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = sessions_.at(id);
    ended.owner = entry.owner;
    entry.state = State::kEnded;
    entry.final_stats = ended.stats;
    entry.final_status = stopped;
    entry.ended_order = ++ended_count_;
    entry.session.reset();
    ForgetOldestEnded();
    changed_.notify_all();
  }
  // The last reference: whatever the session still holds goes now, outside the lock.
  session.reset();
  if (!stopped.ok()) log_->error("session {}: {}", id, MessageOf(stopped));
  return ended;
}

void SessionManager::ForgetOldestEnded() {
  size_t ended = 0;
  for (const auto& [id, entry] : sessions_) ended += entry.state == State::kEnded;
  while (ended > options_.max_ended) {
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.state == State::kEnded &&
          (oldest == sessions_.end() || it->second.ended_order < oldest->second.ended_order)) {
        oldest = it;
      }
    }
    sessions_.erase(oldest);
    --ended;
  }
}

void SessionManager::Reap() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!shutting_down_) {
    changed_.wait_for(lock, options_.reap_interval);
    if (shutting_down_) break;
    std::vector<std::pair<std::string, std::shared_ptr<ManagedSession>>> running;
    for (const auto& [id, entry] : sessions_) {
      if (entry.state == State::kRunning) running.emplace_back(id, entry.session);
    }
    lock.unlock();
    for (const auto& [id, session] : running) {
      bool orphaned = false;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        auto it = sessions_.find(id);
        orphaned = it != sessions_.end() && it->second.orphaned;
      }
      if (orphaned) {
        End(id, "the client that attached it went away").IgnoreError();
      } else if (session->Finished()) {
        End(id, "it finished by itself; releasing what it held").IgnoreError();
      }
    }
    running.clear();  // a last reference goes here, not under the lock
    lock.lock();
  }
}

void SessionManager::ConnectionClosed(uint64_t connection) {
  if (connection == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_.insert(connection).second) {
    closed_order_.push_back(connection);
    while (closed_order_.size() > options_.closed_connections_kept) {
      closed_.erase(closed_order_.front());
      closed_order_.pop_front();
    }
  }
  bool any = false;
  for (auto& [id, entry] : sessions_) {
    if (entry.connection != connection || entry.state == State::kEnded) continue;
    entry.orphaned = true;
    any = true;
  }
  if (any) changed_.notify_all();
}

absl::Status SessionManager::CheckOwner(const Entry& entry, const std::string& id,
                                        const PeerCredentials& caller) const {
  if (caller.uid == 0 || caller.uid == entry.owner) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("session {} belongs to uid {}, not to uid {}", id, entry.owner, caller.uid));
}

absl::StatusOr<v1::SessionStatus> SessionManager::Detach(const std::string& id,
                                                         const PeerCredentials& caller) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(fmt::format("no session {}", id));
    if (absl::Status status = CheckOwner(it->second, id, caller); !status.ok()) return status;
  }
  absl::StatusOr<Ended> ended = End(id, fmt::format("detached by uid {}", caller.uid));
  if (!ended.ok()) return ended.status();
  // A failed end still has figures (the losses it counted): the caller gets
  // both, and decides its verdict from both.
  v1::SessionStatus status = ToProto(ended->stats, ended->owner);
  if (!ended->status.ok()) status.set_end_error(Utf8Text(MessageOf(ended->status)));
  return status;
}

absl::StatusOr<std::vector<v1::SessionStatus>> SessionManager::Status(
    const std::string& id, const PeerCredentials& caller) {
  struct Seen {
    uid_t owner;
    std::shared_ptr<ManagedSession> live;  // null: ended
    session::SessionStats final_stats;
  };
  std::vector<Seen> seen;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, entry] : sessions_) {
      if (!id.empty() && name != id) continue;
      if (!id.empty()) {
        if (absl::Status status = CheckOwner(entry, name, caller); !status.ok()) return status;
      } else if (caller.uid != 0 && caller.uid != entry.owner) {
        continue;  // others' sessions are not listed
      }
      if (entry.state == State::kStarting) continue;  // nothing to show yet
      seen.push_back({entry.owner, entry.session,
                      entry.state == State::kEnded ? entry.final_stats : session::SessionStats()});
    }
  }
  // Figures of live sessions are read outside the manager's lock.
  std::vector<v1::SessionStatus> out;
  for (const Seen& s : seen) out.push_back(ToProto(s.live ? s.live->stats() : s.final_stats, s.owner));
  if (!id.empty() && out.empty()) return absl::NotFoundError(fmt::format("no session {}", id));
  return out;
}

void SessionManager::StopAll(ManagedSession::Deadline deadline) {
  std::vector<std::string> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
    shutdown_deadline_ = std::min(shutdown_deadline_, deadline);
    changed_.notify_all();
    for (const auto& [id, entry] : sessions_) {
      if (entry.state == State::kRunning || entry.state == State::kStopping) running.push_back(id);
    }
  }
  // In parallel: one session slow to seal does not hold up the others.
  std::vector<std::thread> stoppers;
  for (const std::string& id : running) {
    stoppers.emplace_back(
        [this, id, deadline] { End(id, "louped is stopping", deadline).IgnoreError(); });
  }
  for (std::thread& stopper : stoppers) stopper.join();
  // Sessions still starting are ended by their Attach once started.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] {
    return std::none_of(sessions_.begin(), sessions_.end(),
                        [](const auto& entry) { return entry.second.state != State::kEnded; });
  });
}

std::vector<std::string> SessionManager::Unfinished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, entry] : sessions_) {
    if (entry.state != State::kEnded) ids.push_back(id);
  }
  return ids;
}

v1::SessionStatus SessionManager::ToProto(const session::SessionStats& stats, uid_t owner) {
  v1::SessionStatus status;
  status.set_session_id(stats.id);
  status.set_running(stats.running);
  status.set_owner_uid(owner);
  status.set_output_dir(Utf8Text(stats.directory));
  for (uint32_t pid : stats.targets) status.add_targets(pid);
  status.set_events(stats.events);
  for (const auto& [kind, count] : stats.events_by_kind)
    (*status.mutable_events_by_kind())[kind] = count;
  for (const auto& [what, count] : stats.losses) (*status.mutable_losses())[what] = count;
  status.set_bytes_written(stats.bytes_written);
  status.set_segments(stats.segments);
  status.set_last_error(Utf8Text(stats.last_error));
  for (const std::string& warning : stats.warnings) status.add_warnings(Utf8Text(warning));
  status.set_probe_sites(stats.probe_sites);
  status.set_ended_because(Utf8Text(stats.ended_because));
  return status;
}

}  // namespace loupe::control
