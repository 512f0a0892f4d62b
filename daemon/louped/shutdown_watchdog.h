// Bounds louped's shutdown: once armed (SIGTERM), the process is gone within
// `timeout` + `grace` whatever is stuck — a session that does not seal, a
// shipper that does not drain, a destructor that does not return, a log
// that cannot be written. At the deadline it writes one short line to
// `report_fd` (stderr) without blocking, arms a hard exit `grace` later,
// then logs what shutdown was doing and which sessions had not ended and
// exits with status 1. Stalled logging (a full pipe to journald) cannot
// keep it: the hard exit does not log.
#ifndef LOUPE_DAEMON_LOUPED_SHUTDOWN_WATCHDOG_H_
#define LOUPE_DAEMON_LOUPED_SHUTDOWN_WATCHDOG_H_

#include <spdlog/logger.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loupe::louped {

class ShutdownWatchdog {
 public:
  // `exit` ends the process (tests pass their own); by default _exit, with
  // an alarm (SIGALRM, default action) behind it should even that thread
  // not run.
  ShutdownWatchdog(std::chrono::milliseconds timeout, std::shared_ptr<spdlog::logger> log,
                   std::function<void(int)> exit = {},
                   std::chrono::milliseconds grace = std::chrono::seconds(1),
                   int report_fd = 2);
  ~ShutdownWatchdog();  // disarms: shutdown finished in time
  ShutdownWatchdog(const ShutdownWatchdog&) = delete;
  ShutdownWatchdog& operator=(const ShutdownWatchdog&) = delete;

  // Shutdown begins: the deadline runs from now.
  void Arm();
  // What shutdown is doing now ("sealing sessions"), for the report.
  void Phase(std::string what);
  // Who still has work, asked at the deadline (sessions not ended); unset
  // it before what it reads is destroyed.
  void SetPending(std::function<std::vector<std::string>()> pending);
  std::chrono::steady_clock::time_point deadline() const;

 private:
  void Watch();

  const std::chrono::milliseconds timeout_;
  std::shared_ptr<spdlog::logger> log_;
  std::function<void(int)> exit_;
  const bool default_exit_;
  const std::chrono::milliseconds grace_;
  const int report_fd_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool done_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::string phase_ = "starting to stop";
  std::function<std::vector<std::string>()> pending_;
  std::thread thread_;
};

}  // namespace loupe::louped

#endif  // LOUPE_DAEMON_LOUPED_SHUTDOWN_WATCHDOG_H_
