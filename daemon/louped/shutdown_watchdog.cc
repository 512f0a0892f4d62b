#include "daemon/louped/shutdown_watchdog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include <atomic>

namespace loupe::louped {
namespace {

// One line to `fd` that never blocks: dropped when its reader is stalled
// or gone (journald not reading, a closed pipe).
void WriteWithoutBlocking(int fd, std::string_view line) {
  if (fd < 0) return;
  // journald's stdout stream is a socket: it can be asked not to block.
  if (::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0 ||
      errno != ENOTSOCK) {
    return;
  }
  // A pipe or a terminal: write only what has room now (a line is shorter
  // than PIPE_BUF, and a pipe that polls writable has a page free).
  pollfd ready{fd, POLLOUT, 0};
  if (::poll(&ready, 1, 0) != 1 || (ready.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 ||
      (ready.revents & POLLOUT) == 0) {
    return;
  }
  [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
}

}  // namespace

ShutdownWatchdog::ShutdownWatchdog(std::chrono::milliseconds timeout,
                                   std::shared_ptr<spdlog::logger> log,
                                   std::function<void(int)> exit,
                                   std::chrono::milliseconds grace, int report_fd)
    : timeout_(timeout),
      log_(std::move(log)),
      exit_(exit ? std::move(exit) : std::function<void(int)>([](int status) { ::_exit(status); })),
      default_exit_(!exit),
      grace_(grace),
      report_fd_(report_fd) {
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
  // The exit comes first: one line that cannot block, then a hard exit
  // armed, and only then the report through the logger, which can.
  WriteWithoutBlocking(
      report_fd_, fmt::format("louped: shutdown did not finish in {} ms (stuck {}); exiting\n",
                              timeout_.count(), phase));
  auto exited = std::make_shared<std::atomic<bool>>(false);
  auto exit_once = [exit = exit_, exited](int status) {
    if (!exited->exchange(true)) exit(status);
  };
  if (default_exit_) {
    // Should even the thread below not get to run: the kernel ends us.
    ::signal(SIGALRM, SIG_DFL);
    sigset_t alarm_signal;
    sigemptyset(&alarm_signal);
    sigaddset(&alarm_signal, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alarm_signal, nullptr);
    ::alarm(static_cast<unsigned>(
        std::chrono::duration_cast<std::chrono::seconds>(grace_).count() + 2));
  }
  std::thread([exit_once, grace = grace_] {
    std::this_thread::sleep_for(grace);
    exit_once(1);
  }).detach();

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
    const auto asked_until = std::chrono::steady_clock::now() + grace_ / 2;
    while (!*answered && std::chrono::steady_clock::now() < asked_until) {
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
  exit_once(1);
}

}  // namespace loupe::louped
