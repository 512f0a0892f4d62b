// The daemon's sessions: started for callers, owned by their uid, listed,
// watched and stopped. Ended sessions stay listed (their final figures) up
// to a bound.
#ifndef LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_
#define LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_

#include <spdlog/logger.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/control/peer_listener.h"
#include "daemon/session/session.h"
#include "loupe/v1/control.pb.h"

namespace loupe::control {

class SessionManager {
 public:
  // `defaults` supplies everything a request leaves unset.
  SessionManager(session::SessionOptions defaults, std::shared_ptr<spdlog::logger> log)
      : defaults_(std::move(defaults)), log_(std::move(log)) {}

  absl::StatusOr<v1::AttachResponse> Attach(const v1::AttachRequest& request,
                                            const PeerCredentials& caller);
  absl::StatusOr<v1::SessionStatus> Detach(const std::string& id, const PeerCredentials& caller);
  absl::StatusOr<std::vector<v1::SessionStatus>> Status(const std::string& id,
                                                        const PeerCredentials& caller);
  // Stops every session, sealing their traces (daemon shutdown).
  void StopAll();

 private:
  struct Entry {
    std::unique_ptr<session::Session> session;
    uid_t owner = 0;
  };
  absl::StatusOr<session::SessionOptions> OptionsFor(const v1::AttachRequest& request,
                                                     const PeerCredentials& caller) const;
  static v1::SessionStatus ToProto(const session::SessionStats& stats, uid_t owner);
  absl::Status CheckOwner(const Entry& entry, const std::string& id,
                          const PeerCredentials& caller) const;

  session::SessionOptions defaults_;
  std::shared_ptr<spdlog::logger> log_;
  std::mutex mutex_;
  std::map<std::string, Entry> sessions_;
  uint64_t next_id_ = 1;
};

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_SESSION_MANAGER_H_
