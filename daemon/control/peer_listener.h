// The control socket. gRPC cannot tell who is on the other end of a unix
// socket, so louped accepts connections itself, reads the caller's
// credentials (SO_PEERCRED), and hands each connection to the gRPC server;
// handlers look the credentials up by the "fd:N" peer name gRPC gives them.
// The listener also watches each connection for its client going away
// (a duplicate of the socket polled for hang-up), so a session can end with
// the client that attached it.
//
// Credentials by fd number have one residual risk: gRPC may run a call it
// read from a connection after that connection closed, and once the number
// is reused the call would be answered with the new connection's
// credentials. Connections are therefore handed to gRPC on fd numbers taken
// in turn from a window, not the lowest free one, so a number comes back
// only after the whole window has been used; and a new connection on a
// number still in the table ends the old one's sessions first. A call that
// waits in gRPC's queue while a whole window of connections comes and goes
// can still be misattributed: gRPC's "fd:N" peer name carries nothing more
// to tell them apart.
#ifndef LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_
#define LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_

#include <grpcpp/server.h>
#include <sys/types.h>

#include <atomic>
#include <functional>
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
  uint64_t connection = 0;  // which accepted connection (1, 2, ...); 0: none known
};

class PeerListener {
 public:
  // Binds `path`, mode 0660, group `gid` if set. First takes an exclusive
  // lock on `<path>.lock` (holding louped's pid), held for the listener's
  // life: a louped that holds it, even one that has bound but not yet
  // listens, makes this one refuse, so it never removes a starting
  // louped's socket. Then refuses when a louped answers there already, or
  // when something other than a socket is there; removes only a stale
  // socket (one nobody listens on).
  static absl::StatusOr<std::unique_ptr<PeerListener>> Listen(const std::string& path,
                                                              std::optional<gid_t> gid);
  ~PeerListener();

  // Called on the listener's thread when a client's connection closes.
  void OnConnectionClosed(std::function<void(uint64_t connection)> handler);
  // Starts accepting for `server` (which must outlive the listener's Stop).
  void Serve(grpc::Server* server);
  // Stops accepting and removes the socket file, if it is still ours.
  void Stop();
  // Credentials of the connection a handler is serving, from its peer name.
  std::optional<PeerCredentials> Lookup(const std::string& peer) const;
  const std::string& path() const { return path_; }

 private:
  struct Connection {
    PeerCredentials credentials;
    ScopedFd watch;  // a duplicate, polled for the client hanging up
  };
  PeerListener(std::string path, ScopedFd lock, ScopedFd fd, dev_t dev, ino_t ino)
      : path_(std::move(path)), lock_(std::move(lock)), fd_(std::move(fd)), dev_(dev), ino_(ino) {}
  // Moves an accepted connection to the next fd number of the window.
  int Renumber(int connection);
  void AcceptLoop(grpc::Server* server);
  void Accept(grpc::Server* server);

  std::string path_;
  ScopedFd lock_;  // flock'ed <path>.lock, released last
  ScopedFd fd_;
  dev_t dev_;  // of the socket file we bound: Stop removes only that
  ino_t ino_;
  std::atomic<bool> stopping_ = false;
  std::thread thread_;
  std::function<void(uint64_t)> on_closed_;
  uint64_t next_connection_ = 1;  // the accept thread's
  int next_fd_ = -1;               // the accept thread's: where Renumber looks next
  mutable std::mutex mutex_;
  std::map<int, Connection> peers_;  // by the fd gRPC serves the connection on
};

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_PEER_LISTENER_H_
