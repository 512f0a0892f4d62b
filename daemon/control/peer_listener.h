// The control socket. gRPC cannot tell who is on the other end of a unix
// socket, so louped accepts connections itself, reads the caller's
// credentials (SO_PEERCRED), and hands each connection to the gRPC server;
// handlers look the credentials up by the "fd:N" peer name gRPC gives them.
#ifndef LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_
#define LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_

#include <grpcpp/server.h>
#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"

namespace loupe::control {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class PeerListener {
 public:
  // Binds `path` (replacing a stale socket), mode 0660, group `gid` if set.
  static absl::StatusOr<std::unique_ptr<PeerListener>> Listen(const std::string& path,
                                                              std::optional<gid_t> gid);
  ~PeerListener();

  // Starts accepting for `server` (which must outlive the listener's Stop).
  void Serve(grpc::Server* server);
  void Stop();
  // Credentials of the connection a handler is serving, from its peer name.
  std::optional<PeerCredentials> Lookup(const std::string& peer) const;
  const std::string& path() const { return path_; }

 private:
  PeerListener(std::string path, ScopedFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  void AcceptLoop(grpc::Server* server);

  std::string path_;
  ScopedFd fd_;
  std::atomic<bool> stopping_ = false;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<int, PeerCredentials> peers_;  // by connection fd
};

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_
