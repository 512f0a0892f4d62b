// louped's shutdown watchdog: armed, it ends the process at the deadline and
// says what was stuck; disarmed in time, it does nothing.
#include "daemon/louped/shutdown_watchdog.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
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

}  // namespace
}  // namespace loupe::louped
