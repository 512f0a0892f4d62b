// The daemon's sessions: started for callers, owned by their uid, listed,
// watched and ended.
//
// The manager's lock guards only its table: a session is started and
// stopped outside it (BPF loading, uprobe unregistering and the last seal
// can take seconds), so list, status and attach of everyone answer
// meanwhile. A session ends when it is detached, when it finishes by itself
// (duration, targets gone: a reaper notices), or when the connection of the
// client that attached it closes, unless it was attached detached on
// purpose. An ended session is dropped at once, keeping only its final
// figures; the most recent `max_ended` of those stay listed. A caller other
// than root may have `max_sessions_per_user` sessions at once.
#ifndef LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_
#define LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_

#include <spdlog/logger.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/control/peer_listener.h"
#include "daemon/session/session.h"
#include "loupe/v1/control.pb.h"

namespace loupe::control {

// What the manager needs of a running session: louped's is a
// session::Session; tests use fakes to make a start or stop slow or fail.
class ManagedSession {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  virtual ~ManagedSession() = default;
  // Ends it and seals its trace, waiting for its last symbols until
  // `deadline` at most (shutdown); called once.
  virtual absl::Status Stop(Deadline deadline) = 0;
  // Another thread is in Stop: shorten its wait to `deadline` if it can.
  virtual void Hurry(Deadline /*deadline*/) {}
  // True once it has ended by itself (duration, every target gone).
  virtual bool Finished() = 0;
  virtual session::SessionStats stats() const = 0;
};

using SessionStarter =
    std::function<absl::StatusOr<std::unique_ptr<ManagedSession>>(session::SessionOptions)>;

// Starts session::Session, the engine.
SessionStarter EngineSessions(std::shared_ptr<spdlog::logger> log);

struct SessionManagerOptions {
  session::SessionOptions defaults;  // everything a request leaves unset
  size_t max_ended = 64;             // final figures kept of ended sessions
  // Sessions starting, running or stopping at once per uid; root is exempt.
  size_t max_sessions_per_user = 8;
  // Connection ids of recently closed clients remembered, for an Attach
  // whose client hung up before the session was reserved.
  size_t closed_connections_kept = 4096;
  std::chrono::milliseconds reap_interval{200};
};

class SessionManager {
 public:
  // `starter` defaults to EngineSessions(log).
  SessionManager(SessionManagerOptions options, std::shared_ptr<spdlog::logger> log,
                 SessionStarter starter = {});
  ~SessionManager();  // ends what still runs (StopAll)
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  absl::StatusOr<v1::AttachResponse> Attach(const v1::AttachRequest& request,
                                            const PeerCredentials& caller);
  absl::StatusOr<v1::SessionStatus> Detach(const std::string& id, const PeerCredentials& caller);
  // One session, or every session the caller may see (`id` empty).
  absl::StatusOr<std::vector<v1::SessionStatus>> Status(const std::string& id,
                                                        const PeerCredentials& caller);
  // A client's connection closed: the sessions it attached without
  // `detached` end (soon, on the reaper's thread).
  void ConnectionClosed(uint64_t connection);
  // Refuses new sessions and ends every session, sealing its trace (daemon
  // shutdown); returns once none runs. Sessions wait for their last symbols
  // until `deadline` at most, so they seal before louped's watchdog fires.
  void StopAll(ManagedSession::Deadline deadline = ManagedSession::Deadline::max());
  // Sessions starting, running or stopping: what shutdown still waits for.
  std::vector<std::string> Unfinished() const;

 private:
  enum class State { kStarting, kRunning, kStopping, kEnded };
  struct Entry {
    State state = State::kStarting;
    uid_t owner = 0;
    uint64_t connection = 0;   // the attaching client's; 0: none (detached on purpose)
    bool orphaned = false;     // that connection closed
    std::shared_ptr<ManagedSession> session;  // until it has ended
    session::SessionStats final_stats;        // once it has ended
    absl::Status final_status;
    uint64_t ended_order = 0;  // 1 for the first session to end, 2 for the next...
  };
  struct Ended {
    session::SessionStats stats;
    absl::Status status;
    uid_t owner = 0;
  };

  // Ends session `id` unless it has ended already (then its final figures);
  // concurrent callers wait for the one that stops it.
  absl::StatusOr<Ended> End(const std::string& id, std::string_view why,
                            ManagedSession::Deadline deadline = ManagedSession::Deadline::max());
  void Reap();
  void ForgetOldestEnded();  // with mutex_ held
  absl::Status CheckSessionLimit(const PeerCredentials& caller) const;  // with mutex_ held
  absl::Status CheckOwner(const Entry& entry, const std::string& id,
                          const PeerCredentials& caller) const;
  static v1::SessionStatus ToProto(const session::SessionStats& stats, uid_t owner);

  const SessionManagerOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  SessionStarter starter_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a session ended, one was orphaned, or shutdown began
  std::map<std::string, Entry> sessions_;
  uint64_t next_id_ = 1;
  uint64_t ended_count_ = 0;
  bool shutting_down_ = false;
  ManagedSession::Deadline shutdown_deadline_ = ManagedSession::Deadline::max();
  // Recently closed connections, oldest first (bounded): a hang-up handled
  // before its Attach reserved an entry is still found by that Attach.
  std::set<uint64_t> closed_;
  std::deque<uint64_t> closed_order_;
  std::thread reaper_;
};

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_
