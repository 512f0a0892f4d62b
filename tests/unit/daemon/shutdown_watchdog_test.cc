// louped's shutdown watchdog: armed, it ends the process at the deadline and
// says what was stuck; disarmed in time, it does nothing.
#include "daemon/louped/shutdown_watchdog.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <sstream>

namespace loupe::louped {
namespace {

struct Captured {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> log = std::make_shared<spdlog::logger>(
      "watchdog-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(text));
};

TEST(ShutdownWatchdogTest, ExitsAtTheDeadlineNamingWhatWasStuck) {
  Captured captured;
  std::atomic<int> exit_status = -1;
  {
    ShutdownWatchdog watchdog(std::chrono::milliseconds(100), captured.log,
                              [&](int status) { exit_status = status; });
    watchdog.SetPending([] { return std::vector<std::string>{"s1", "held"}; });
    watchdog.Phase("sealing sessions");
    watchdog.Arm();
    for (int i = 0; i < 500 && exit_status < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(exit_status, 1);
  const std::string text = captured.text.str();
  EXPECT_NE(text.find("stuck sealing sessions"), std::string::npos) << text;
  EXPECT_NE(text.find("sessions not ended: s1, held"), std::string::npos) << text;
}

TEST(ShutdownWatchdogTest, NeverFiresUnarmedOrWhenShutdownFinishesInTime) {
  Captured captured;
  std::atomic<int> exits = 0;
  {
    ShutdownWatchdog unarmed(std::chrono::milliseconds(1), captured.log, [&](int) { ++exits; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {
    ShutdownWatchdog armed(std::chrono::seconds(30), captured.log, [&](int) { ++exits; });
    armed.Arm();
  }
  EXPECT_EQ(exits, 0);
}

TEST(ShutdownWatchdogTest, AStuckPendingQueryDoesNotHoldTheExit) {
  Captured captured;
  std::atomic<int> exit_status = -1;
  std::atomic<bool> release = false;
  {
    ShutdownWatchdog watchdog(std::chrono::milliseconds(50), captured.log,
                              [&](int status) { exit_status = status; });
    watchdog.SetPending([&] {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return std::vector<std::string>();
    });
    watchdog.Arm();
    for (int i = 0; i < 500 && exit_status < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  release = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the query thread end
  EXPECT_EQ(exit_status, 1);
  EXPECT_NE(captured.text.str().find("did not answer"), std::string::npos);
}

// A sink that blocks every write until released: spdlog to a stalled stderr
// (journald not reading), where a write(2) never returns.
class BlockingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Release() {
    std::lock_guard<std::mutex> lock(gate_);
    released_ = true;
    changed_.notify_all();
  }
  std::atomic<int> blocked = 0;

 protected:
  void sink_it_(const spdlog::details::log_msg&) override {
    ++blocked;
    std::unique_lock<std::mutex> lock(gate_);
    changed_.wait(lock, [this] { return released_; });
  }
  void flush_() override {}

 private:
  std::mutex gate_;
  std::condition_variable changed_;
  bool released_ = false;
};

// A pipe nobody reads, filled up: a blocking write(2) to it never returns.
struct FullPipe {
  int fds[2] = {-1, -1};
  FullPipe() {
    if (::pipe(fds) != 0) return;
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    const std::string chunk(4096, 'x');
    while (::write(fds[1], chunk.data(), chunk.size()) > 0) {
    }
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);
  }
  ~FullPipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
};

// Issue 15: logging to a stalled stderr must not keep louped from exiting.
TEST(ShutdownWatchdogTest, ExitsWhenTheLogAndStderrBlock) {
  auto sink = std::make_shared<BlockingSink>();
  auto log = std::make_shared<spdlog::logger>("blocked", sink);
  FullPipe stderr_pipe;
  ASSERT_GE(stderr_pipe.fds[1], 0);
  std::atomic<int> exit_status = -1;
  const auto armed = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration took{};
  {
    ShutdownWatchdog watchdog(std::chrono::milliseconds(50), log,
                              [&](int status) { exit_status = status; },
                              std::chrono::milliseconds(200), stderr_pipe.fds[1]);
    watchdog.Arm();
    for (int i = 0; i < 1000 && exit_status < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    took = std::chrono::steady_clock::now() - armed;
    EXPECT_GE(sink->blocked.load(), 1) << "the report did not get to the logger";
    sink->Release();  // lets the watchdog's own thread finish, to be joined
  }
  EXPECT_EQ(exit_status, 1);
  EXPECT_LT(took, std::chrono::seconds(3)) << "the exit waited for the blocked log";
}

TEST(ShutdownWatchdogTest, TheFirstLineReachesStderrBeforeTheLog) {
  Captured captured;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::atomic<int> exit_status = -1;
  {
    ShutdownWatchdog watchdog(std::chrono::milliseconds(30), captured.log,
                              [&](int status) { exit_status = status; },
                              std::chrono::milliseconds(200), fds[1]);
    watchdog.Phase("shipping what is left");
    watchdog.Arm();
    for (int i = 0; i < 500 && exit_status < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(exit_status, 1);
  char buffer[512] = {};
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer - 1);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buffer).find("stuck shipping what is left); exiting"), std::string::npos)
      << buffer;
}

}  // namespace
}  // namespace loupe::louped
