#include "daemon/control/peer_listener.h"

#include <fmt/format.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>

#include "daemon/base/status_util.h"

namespace loupe::control {

absl::StatusOr<std::unique_ptr<PeerListener>> PeerListener::Listen(const std::string& path,
                                                                   std::optional<gid_t> gid) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    return absl::InvalidArgumentError(
        fmt::format("socket = '{}': a path of 1 .. {} bytes", path, sizeof address.sun_path - 1));
  }
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  path.copy(address.sun_path, path.size());
  ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("socket", path);
  ::unlink(path.c_str());  // a stale socket of an earlier run
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return ErrnoStatus("bind", path);
  }
  // Who may connect is decided by the file: owner and group only.
  if (::chmod(path.c_str(), 0660) != 0) return ErrnoStatus("chmod", path);
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return ErrnoStatus("chown", path);
  }
  if (::listen(fd.get(), 64) != 0) return ErrnoStatus("listen", path);
  return std::unique_ptr<PeerListener>(new PeerListener(path, std::move(fd)));
}

PeerListener::~PeerListener() { Stop(); }

void PeerListener::Serve(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void PeerListener::AcceptLoop(grpc::Server* server) {
  while (!stopping_) {
    pollfd ready{fd_.get(), POLLIN, 0};
    if (::poll(&ready, 1, 200) <= 0) continue;
    // gRPC drives the connection with its own poller: it must not block.
    const int connection = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (connection < 0) continue;
    ucred credentials{};
    socklen_t size = sizeof credentials;
    if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
      ::close(connection);
      continue;
    }
    {
      // The fd number is reused once gRPC closes a connection: overwrite.
      std::lock_guard<std::mutex> lock(mutex_);
      peers_[connection] = {credentials.pid, credentials.uid, credentials.gid};
    }
    grpc::AddInsecureChannelFromFd(server, connection);
  }
}

void PeerListener::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_.valid()) {
    fd_.Reset();
    ::unlink(path_.c_str());
  }
}

std::optional<PeerCredentials> PeerListener::Lookup(const std::string& peer) const {
  // gRPC names a channel made from a file descriptor "fd:<n>".
  if (!peer.starts_with("fd:")) return std::nullopt;
  int fd = -1;
  auto [end, ec] = std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
  if (ec != std::errc()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

}  // namespace loupe::control
