#include "daemon/louped/shutdown_watchdog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>

namespace loupe::louped {

ShutdownWatchdog::ShutdownWatchdog(std::chrono::milliseconds timeout,
                                   std::shared_ptr<spdlog::logger> log,
                                   std::function<void(int)> exit)
    : timeout_(timeout),
      log_(std::move(log)),
      exit_(exit ? std::move(exit) : std::function<void(int)>([](int status) { ::_exit(status); })) {
  thread_ = std::thread([this] { Watch(); });
}

ShutdownWatchdog::~ShutdownWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ShutdownWatchdog::Arm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (armed_) return;
    armed_ = true;
    deadline_ = std::chrono::steady_clock::now() + timeout_;
  }
  changed_.notify_all();
}

void ShutdownWatchdog::Phase(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = std::move(what);
}

void ShutdownWatchdog::SetPending(std::function<std::vector<std::string>()> pending) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = std::move(pending);
}

std::chrono::steady_clock::time_point ShutdownWatchdog::deadline() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return armed_ ? deadline_ : std::chrono::steady_clock::time_point::max();
}

void ShutdownWatchdog::Watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return armed_ || done_; });
  if (changed_.wait_until(lock, deadline_, [this] { return done_; })) return;
  const std::string phase = phase_;
  std::function<std::vector<std::string>()> pending = pending_;
  lock.unlock();
  log_->error("louped: shutdown did not finish in {} ms (stuck {}); exiting anyway",
              timeout_.count(), phase);
  log_->flush();
  // Asked on a thread of its own: what is stuck must not keep us here too.
  auto report = std::make_shared<std::pair<std::mutex, std::vector<std::string>>>();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  if (pending) {
    std::thread([pending, report, answered] {
      std::vector<std::string> ids = pending();
      std::lock_guard<std::mutex> guard(report->first);
      report->second = std::move(ids);
      *answered = true;
    }).detach();
    for (int i = 0; i < 100 && !*answered; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (*answered) {
      std::lock_guard<std::mutex> guard(report->first);
      if (!report->second.empty()) {
        log_->error("louped: sessions not ended: {} (their last segment may be left .active)",
                    fmt::join(report->second, ", "));
      }
    } else {
      log_->error("louped: the session list did not answer");
    }
    log_->flush();
  }
  exit_(1);
}

}  // namespace loupe::louped
