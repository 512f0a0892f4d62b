#include "daemon/ship/shipper.h"

#include <fmt/format.h>

#include <random>

#include "daemon/base/status_util.h"
#include "daemon/base/utf8.h"

namespace loupe::ship {
namespace {

uint64_t UnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The collector looked at this segment and will never take it; retrying the
// same bytes cannot help. Everything else (unreachable, overloaded, a token
// problem, a cut connection) is worth retrying.
bool RefusedForGood(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsDataLoss(status) ||
         absl::IsFailedPrecondition(status);
}

constexpr int kAttemptsBeforeRejecting = 3;

}  // namespace

absl::StatusOr<std::unique_ptr<Shipper>> Shipper::Start(ShipperOptions options,
                                                        std::shared_ptr<spdlog::logger> log) {
  absl::StatusOr<std::unique_ptr<CollectorConnection>> connection =
      CollectorConnection::Open(options.collector);
  if (!connection.ok()) return connection.status();
  Outbox outbox(options.directory, options.keep_shipped);
  if (absl::Status prepared = outbox.Prepare(); !prepared.ok()) return prepared;
  // What a crashed run left .active is louped's to seal (leftovers.h),
  // before the shipper starts; other writers' files are not ours to touch.
  std::unique_ptr<Shipper> shipper(
      new Shipper(std::move(options), std::move(log), *std::move(connection)));
  shipper->thread_ = std::thread([raw = shipper.get()] { raw->Run(); });
  return shipper;
}

Shipper::Shipper(ShipperOptions options, std::shared_ptr<spdlog::logger> log,
                 std::unique_ptr<CollectorConnection> connection)
    : options_(std::move(options)),
      log_(std::move(log)),
      connection_(std::move(connection)),
      outbox_(options_.directory, options_.keep_shipped) {
  status_.set_enabled(true);
  status_.set_collector(options_.collector.address);
}

Shipper::~Shipper() { Stop(); }

void Shipper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Shipper::Drain(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
    woken_ = true;
    backoff_ = std::chrono::milliseconds(0);
  }
  wake_.notify_all();
  // The thread ends by itself once nothing waits; past the deadline it is
  // told to stop, which cancels the upload in flight (left resumable).
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_until(lock, deadline, [this] { return !draining_; });
  const bool emptied = !draining_;
  lock.unlock();
  if (!emptied) {
    log_->warn("shipper: deadline reached with {} segment(s) unshipped; the next start ships them",
               Status().queued_segments());
  }
  Stop();
}

v1::ShippingStatus Shipper::Status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

std::chrono::milliseconds Shipper::NextBackoff() {
  backoff_ = backoff_.count() == 0 ? options_.retry_min
                                   : std::min(backoff_ * 2, options_.retry_max);
  // Full jitter over the upper half: daemons that lost the same collector
  // do not all return at once.
  thread_local std::minstd_rand random(std::random_device{}());
  const auto half = backoff_.count() / 2;
  return std::chrono::milliseconds(half + static_cast<int64_t>(random() % (half + 1)));
}

void Shipper::Run() {
  for (;;) {
    bool shipped_or_tried = ShipOne();
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (!shipped_or_tried && draining_) {
      draining_ = false;  // nothing left: Drain's wait ends
      lock.unlock();
      wake_.notify_all();
      return;
    }
    std::chrono::milliseconds pause =
        backoff_.count() > 0 ? NextBackoff()
                             : (shipped_or_tried ? std::chrono::milliseconds(0)
                                                 : options_.scan_interval);
    if (pause.count() > 0) {
      wake_.wait_for(lock, pause,
                     [this] { return stopping_ || (woken_ && backoff_.count() == 0); });
    }
    woken_ = false;
    if (stopping_) return;
  }
}

bool Shipper::ShipOne() {
  OutboxTotals totals;
  std::optional<QueuedSegment> next = outbox_.Next(&totals);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_.set_queued_segments(totals.segments);
    status_.set_queued_bytes(totals.bytes);
  }
  if (!next) return false;

  absl::StatusOr<UploadOutcome> outcome =
      UploadSegment(*connection_, next->path, options_.upload, [this](grpc::ClientContext* call) {
        std::lock_guard<std::mutex> lock(mutex_);
        in_flight_ = call;
        if (call != nullptr && stopping_) call->TryCancel();
      });
  if (!outcome.ok()) {
    Failed(next->path, outcome.status());
    return true;
  }
  if (absl::Status released =
          outbox_.Shipped(next->path, {outcome->dev, outcome->ino, outcome->size});
      !released.ok()) {
    // Shipping again later is harmless: the collector acknowledges duplicates.
    log_->error("shipper: {}", MessageOf(released));
  }
  const std::string name = next->path.substr(next->path.find_last_of('/') + 1);
  if (outcome->resumed_from > 0) {
    log_->info("shipper: {} stored, resumed after {} of {} bytes", name, outcome->resumed_from,
               outcome->size);
  } else if (outcome->duplicate) {
    log_->info("shipper: {} was already stored on the collector", name);
  } else {
    log_->debug("shipper: {} stored ({} bytes)", name, outcome->size);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (backoff_.count() > 0) log_->info("shipper: collector {} accepts again", status_.collector());
  backoff_ = std::chrono::milliseconds(0);
  permanent_failures_ = 0;
  status_.set_shipped_segments(status_.shipped_segments() + 1);
  status_.set_shipped_bytes(status_.shipped_bytes() + outcome->size);
  status_.set_resumed_uploads(status_.resumed_uploads() + (outcome->resumed_from > 0));
  status_.set_last_success_unix_ms(UnixMs());
  status_.set_queued_segments(totals.segments - 1);
  status_.set_queued_bytes(totals.bytes - next->size);
  return true;
}

void Shipper::Failed(const std::string& path, const absl::Status& status) {
  const std::string message(MessageOf(status));
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) return;  // cancelled by shutdown: resumes next run
  // Repeats of the same error are not logged again while it lasts.
  if (message != status_.last_error()) log_->warn("shipper: {}", message);
  status_.set_last_error(Utf8Text(message));
  status_.set_last_error_unix_ms(UnixMs());
  if (!RefusedForGood(status)) {
    permanent_failures_ = 0;
    if (backoff_.count() == 0) backoff_ = options_.retry_min / 2;
    return;
  }
  permanent_failures_ = path == failing_path_ ? permanent_failures_ + 1 : 1;
  failing_path_ = path;
  if (permanent_failures_ < kAttemptsBeforeRejecting) {
    if (backoff_.count() == 0) backoff_ = options_.retry_min / 2;
    return;
  }
  permanent_failures_ = 0;
  status_.set_rejected_segments(status_.rejected_segments() + 1);
  lock.unlock();
  absl::Status set_aside = outbox_.Reject(path);
  log_->error("shipper: {} refused {} times, set aside as {}.rejected{}: {}", path,
              kAttemptsBeforeRejecting, path,
              set_aside.ok() ? "" : fmt::format(" (failed: {})", MessageOf(set_aside)), message);
}

}  // namespace loupe::ship
