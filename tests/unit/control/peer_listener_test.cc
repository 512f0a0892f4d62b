// The control socket's path (issue 15): a live louped keeps its socket, a
// file that is not a socket is never deleted, only a stale socket is
// replaced; a closed client connection is reported.
#include "daemon/control/peer_listener.h"

#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "loupe/v1/control.grpc.pb.h"
#include "tests/support/temp_dir.h"

namespace loupe::control {
namespace {

int Connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(PeerListenerTest, ASecondListenerIsRefusedAndTheFirstStillAnswers) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  auto first = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = PeerListener::Listen(path, std::nullopt);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().ToString().find("a louped already answers there"), std::string::npos)
      << second.status();
  const int client = Connect(path);
  EXPECT_GE(client, 0) << "the first listener's socket was taken over";
  if (client >= 0) ::close(client);
}

TEST(PeerListenerTest, AFileThatIsNotASocketIsKeptAndRefused) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  std::ofstream(path) << "precious";
  auto listener = PeerListener::Listen(path, std::nullopt);
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(listener.status().ToString().find("a regular file is there, not a socket"),
            std::string::npos)
      << listener.status();
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");

  const std::string directory = dir.File("a-dir");
  ASSERT_EQ(::mkdir(directory.c_str(), 0700), 0);
  auto on_dir = PeerListener::Listen(directory, std::nullopt);
  ASSERT_FALSE(on_dir.ok());
  EXPECT_NE(on_dir.status().ToString().find("a directory is there"), std::string::npos);
}

// A socket bound but not listening yet (a louped between bind and listen).
int BindOnly(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, path.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Issue 15: two loupeds starting together. The first has bound the path but
// does not listen yet, so a probe gets ECONNREFUSED as from a stale socket;
// its lock on <socket>.lock keeps the second from removing the socket.
TEST(PeerListenerTest, TheLockKeepsASecondLoupedOffAStartingOnesSocket) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  const std::string lock_path = path + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(::write(lock, "4321\n", 5), 5);
  const int starting = BindOnly(path);
  ASSERT_GE(starting, 0);

  auto second = PeerListener::Listen(path, std::nullopt);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().ToString().find("a louped already answers there or is starting (pid "
                                            "4321 holds " + lock_path + ")"),
            std::string::npos)
      << second.status();
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << "the starting louped's socket was removed";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  // The first one went away without listening: its socket is stale now.
  ::close(starting);
  ::close(lock);
  auto now = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(now.ok()) << now.status();
  std::ifstream pid_file(lock_path);
  pid_t pid = 0;
  pid_file >> pid;
  EXPECT_EQ(pid, ::getpid()) << "the lock file does not name its holder";
  // Held for the listener's life, released by Stop.
  const int probe = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  EXPECT_NE(::flock(probe, LOCK_EX | LOCK_NB), 0);
  (*now)->Stop();
  EXPECT_EQ(::flock(probe, LOCK_EX | LOCK_NB), 0);
  ::close(probe);
}

TEST(PeerListenerTest, AStaleSocketIsReplaced) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  {
    // Bound, never listening, then closed: what a crashed louped leaves.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, path.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ::close(fd);
  }
  auto listener = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int client = Connect(path);
  EXPECT_GE(client, 0);
  if (client >= 0) ::close(client);
}

TEST(PeerListenerTest, StopRemovesOnlyItsOwnSocket) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  auto listener = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(listener.ok());
  // Someone replaces the path meanwhile (another louped, an operator).
  ASSERT_EQ(::unlink(path.c_str()), 0);
  std::ofstream(path) << "theirs";
  (*listener)->Stop();
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << "Stop deleted a file that was not its socket";

  const std::string mine = dir.File("mine.sock");
  auto own = PeerListener::Listen(mine, std::nullopt);
  ASSERT_TRUE(own.ok());
  (*own)->Stop();
  EXPECT_NE(::stat(mine.c_str(), &st), 0);
}

TEST(PeerListenerTest, AClosedConnectionIsReportedOnce) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  auto listener = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(listener.ok());
  std::mutex mutex;
  std::vector<uint64_t> closed;
  (*listener)->OnConnectionClosed([&](uint64_t connection) {
    std::lock_guard<std::mutex> lock(mutex);
    closed.push_back(connection);
  });
  grpc::ServerBuilder builder;
  v1::Control::Service unimplemented;  // a server needs a service
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  (*listener)->Serve(server.get());
  const int first = Connect(path);
  const int second = Connect(path);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  ::close(first);  // as a killed tracectl's connection closes
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return closed.size();
  };
  for (int i = 0; i < 1000 && count() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // no second report
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(closed.size(), 1u);
    EXPECT_NE(closed[0], 0u);
  }
  ::close(second);
  for (int i = 0; i < 1000 && count() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(closed.size(), 2u);
    EXPECT_NE(closed[0], closed[1]);
  }
  (*listener)->Stop();
  server->Shutdown();
}

// Issue 15: credentials are found by gRPC's fd number. A connection that
// closed must not leave its number to the next connection at once, or a
// call of the old one still queued in gRPC would get the new one's
// credentials: numbers are taken in turn, not lowest first.
TEST(PeerListenerTest, ANewConnectionDoesNotTakeTheNumberOfOneJustClosed) {
  testing::TempDir dir;
  const std::string path = dir.File("louped.sock");
  auto listener = PeerListener::Listen(path, std::nullopt);
  ASSERT_TRUE(listener.ok());
  std::atomic<int> closed = 0;
  (*listener)->OnConnectionClosed([&](uint64_t) { ++closed; });
  grpc::ServerBuilder builder;
  v1::Control::Service unimplemented;
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  (*listener)->Serve(server.get());
  // The fd number each connection was served on, by its connection id.
  auto numbers = [&] {
    std::map<uint64_t, int> found;
    for (int fd = 0; fd < 8192; ++fd) {
      if (auto peer = (*listener)->Lookup(fmt::format("fd:{}", fd))) found[peer->connection] = fd;
    }
    return found;
  };
  std::vector<int> served;
  for (int round = 0; round < 3; ++round) {
    const int client = Connect(path);
    ASSERT_GE(client, 0);
    std::map<uint64_t, int> now;
    for (int i = 0; i < 1000 && now.size() < static_cast<size_t>(round + 1); ++i) {
      now = numbers();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(now.size(), static_cast<size_t>(round + 1));
    served.push_back(now.rbegin()->second);
    ::close(client);
    for (int i = 0; i < 1000 && closed < round + 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(closed, round + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // gRPC closes its fd too
  }
  EXPECT_NE(served[0], served[1]);
  EXPECT_NE(served[1], served[2]);
  EXPECT_NE(served[0], served[2]);
  (*listener)->Stop();
  server->Shutdown();
}

}  // namespace
}  // namespace loupe::control
