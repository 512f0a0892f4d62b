#include "daemon/control/peer_listener.h"

#include <fmt/format.h>
#include <grpcpp/server_posix.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <vector>

#include "daemon/base/status_util.h"

namespace loupe::control {
namespace {

const char* FileType(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISLNK(mode)) return "symbolic link";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "device";
  return "file that is not a socket";
}

// Connections go to gRPC on fd numbers from [kFdWindowStart, end) in turn,
// `end` at most kFdWindowStart + kFdWindowSize and within RLIMIT_NOFILE.
constexpr int kFdWindowStart = 256;
constexpr int kFdWindowSize = 4096;

// One louped per socket path: an exclusive lock on `<path>.lock`, holding
// the pid of the louped that has it. Without it, a louped that has bound
// the path but does not listen yet looks stale to a second one starting at
// the same moment, which would remove its socket.
absl::StatusOr<ScopedFd> LockSocketPath(const std::string& path) {
  const std::string lock_path = path + ".lock";
  ScopedFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!lock.valid()) return ErrnoStatus("open lock file", lock_path);
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return ErrnoStatus("lock", lock_path);
    char text[32] = {};
    std::string holder = "another process";
    if (const ssize_t n = ::pread(lock.get(), text, sizeof text - 1, 0); n > 0) {
      int pid = 0;
      const char* end = text + n;
      if (auto [at, ec] = std::from_chars(text, end, pid); ec == std::errc() && pid > 0) {
        holder = fmt::format("pid {}", pid);
      }
    }
    return absl::AlreadyExistsError(fmt::format(
        "socket = '{}': a louped already answers there or is starting ({} holds {}); not "
        "starting a second one (stop it first, or give this one another socket path)",
        path, holder, lock_path));
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(lock.get(), 0) != 0 ||
      ::pwrite(lock.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return ErrnoStatus("write pid to", lock_path);
  }
  return lock;
}

// What is at `path` may go only if it is a socket nobody listens on: a live
// louped keeps its socket, and other files are not louped's to delete.
absl::Status ClearStaleSocket(const std::string& path, const sockaddr_un& address) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoStatus("stat", path);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        fmt::format("socket = '{}': a {} is there, not a socket; louped removes only a stale "
                    "socket, so move that file away or choose another socket path",
                    path, FileType(st.st_mode)));
  }
  ScopedFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe.valid()) return ErrnoStatus("socket", path);
  // EAGAIN: a listener with a full backlog, alive all the same.
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ||
      errno == EAGAIN || errno == EINPROGRESS) {
    return absl::AlreadyExistsError(fmt::format(
        "socket = '{}': a louped already answers there; not starting a second one (stop it "
        "first, or give this one another socket path)",
        path));
  }
  if (errno != ECONNREFUSED) return ErrnoStatus("connect to the socket already at", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove stale socket", path);
  return absl::OkStatus();
}

}  // namespace

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
  absl::StatusOr<ScopedFd> lock = LockSocketPath(path);
  if (!lock.ok()) return lock.status();
  if (absl::Status status = ClearStaleSocket(path, address); !status.ok()) return status;
  ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("socket", path);
  // EADDRINUSE here: another louped bound the path since the check above.
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return ErrnoStatus("bind", path);
  }
  struct stat bound;
  if (::lstat(path.c_str(), &bound) != 0) return ErrnoStatus("stat", path);
  // Who may connect is decided by the file: owner and group only.
  if (::chmod(path.c_str(), 0660) != 0) return ErrnoStatus("chmod", path);
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return ErrnoStatus("chown", path);
  }
  if (::listen(fd.get(), 64) != 0) return ErrnoStatus("listen", path);
  return std::unique_ptr<PeerListener>(
      new PeerListener(path, *std::move(lock), std::move(fd), bound.st_dev, bound.st_ino));
}

PeerListener::~PeerListener() { Stop(); }

void PeerListener::OnConnectionClosed(std::function<void(uint64_t connection)> handler) {
  on_closed_ = std::move(handler);
}

void PeerListener::Serve(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

int PeerListener::Renumber(int connection) {
  rlimit limit{};
  const int cap = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 1u << 30
                      ? static_cast<int>(limit.rlim_cur)
                      : 1 << 20;
  const int start = std::min(kFdWindowStart, cap / 2);
  const int end = std::min(cap, start + kFdWindowSize);
  if (end - start < 2) return connection;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (next_fd_ < start || next_fd_ >= end) next_fd_ = start;
    const int moved = ::fcntl(connection, F_DUPFD_CLOEXEC, next_fd_);
    if (moved >= 0 && moved < end) {
      ::close(connection);
      next_fd_ = moved + 1;
      return moved;
    }
    if (moved >= 0) ::close(moved);
    next_fd_ = start;  // past the window's end: around again
  }
  return connection;  // the window is full: the lowest number it is
}

void PeerListener::Accept(grpc::Server* server) {
  // gRPC drives the connection with its own poller: it must not block.
  const int accepted = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (accepted < 0) return;
  const int connection = Renumber(accepted);
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    ::close(connection);
    return;
  }
  ScopedFd watch(::fcntl(connection, F_DUPFD_CLOEXEC, 0));
  std::optional<uint64_t> replaced;
  {
    // The number was gRPC's for an earlier connection, closed since. If its
    // hang-up has not been reported yet, it is now, before the entry goes:
    // its sessions must not outlive it unnoticed.
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = peers_.find(connection);
    if (it != peers_.end() && it->second.watch.valid()) {
      replaced = it->second.credentials.connection;
    }
    peers_[connection] = {{credentials.pid, credentials.uid, credentials.gid, next_connection_++},
                          std::move(watch)};
  }
  if (replaced && on_closed_) on_closed_(*replaced);
  grpc::AddInsecureChannelFromFd(server, connection);
}

void PeerListener::AcceptLoop(grpc::Server* server) {
  std::vector<pollfd> ready;
  std::vector<int> keys;  // peers_ key of each ready[i > 0]
  while (!stopping_) {
    ready.assign(1, pollfd{fd_.get(), POLLIN, 0});
    keys.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [key, peer] : peers_) {
        if (!peer.watch.valid()) continue;
        // Only the hang-up: the bytes are gRPC's to read.
        ready.push_back({peer.watch.get(), POLLRDHUP, 0});
        keys.push_back(key);
      }
    }
    if (::poll(ready.data(), ready.size(), 200) <= 0) continue;
    std::vector<uint64_t> closed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 1; i < ready.size(); ++i) {
        if ((ready[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) continue;
        auto it = peers_.find(keys[i - 1]);
        if (it == peers_.end() || it->second.watch.get() != ready[i].fd) continue;
        closed.push_back(it->second.credentials.connection);
        // Its credentials stay until gRPC reuses the fd number: a call the
        // client sent before going away is still answered as its own.
        it->second.watch.Reset();
      }
    }
    for (uint64_t connection : closed) {
      if (on_closed_) on_closed_(connection);
    }
    if (ready[0].revents & POLLIN) Accept(server);
  }
}

void PeerListener::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_.valid()) {
    fd_.Reset();
    // Only our own socket: never one a later louped bound at the same path.
    struct stat st;
    if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev_ &&
        st.st_ino == ino_) {
      ::unlink(path_.c_str());
    }
  }
  // The lock goes last, once the socket is gone; its file stays (removing
  // it would let two loupeds lock two different files of one name).
  lock_.Reset();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, peer] : peers_) peer.watch.Reset();
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
  return it->second.credentials;
}

}  // namespace loupe::control
