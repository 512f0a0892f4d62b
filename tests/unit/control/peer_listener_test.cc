// The control socket's path (issue 15): a live louped keeps its socket, a
// file that is not a socket is never deleted, only a stale socket is
// replaced; a closed client connection is reported.
#include "daemon/control/peer_listener.h"

#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
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

}  // namespace
}  // namespace loupe::control
