// louped's shipper: a background thread that sends each sealed segment of
// the output directory to the collector, oldest first, and lets go of the
// local file only once the collector has it durably. Failures back off
// exponentially with jitter; segments wait on disk meanwhile, within the
// writer's disk budget (whose evictions the trace records).
#ifndef LOUPE_DAEMON_SHIP_SHIPPER_H_
#define LOUPE_DAEMON_SHIP_SHIPPER_H_

#include <spdlog/logger.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/ship/collector_connection.h"
#include "daemon/ship/outbox.h"
#include "daemon/ship/segment_upload.h"
#include "loupe/v1/control.pb.h"

namespace loupe::ship {

struct ShipperOptions {
  CollectorEndpoint collector;
  std::string directory;
  bool keep_shipped = false;
  UploadSettings upload;
  std::chrono::milliseconds scan_interval{500};
  std::chrono::milliseconds retry_min{250};
  std::chrono::milliseconds retry_max{30'000};
};

class Shipper {
 public:
  static absl::StatusOr<std::unique_ptr<Shipper>> Start(ShipperOptions options,
                                                        std::shared_ptr<spdlog::logger> log);
  ~Shipper();  // stops at once; an upload in flight stays resumable

  // Ships what waits until the outbox is empty or `deadline` passes, then
  // stops. What is left is shipped by the next run.
  void Drain(std::chrono::steady_clock::time_point deadline);
  v1::ShippingStatus Status() const;

 private:
  Shipper(ShipperOptions options, std::shared_ptr<spdlog::logger> log,
          std::unique_ptr<CollectorConnection> connection);
  void Run();
  // One attempt at the oldest segment; false when there was none.
  bool ShipOne();
  void Failed(const std::string& path, const absl::Status& status);
  std::chrono::milliseconds NextBackoff();
  void Stop();

  ShipperOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<CollectorConnection> connection_;
  Outbox outbox_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool draining_ = false;
  bool woken_ = false;
  grpc::ClientContext* in_flight_ = nullptr;  // cancelled by Stop
  v1::ShippingStatus status_;
  std::chrono::milliseconds backoff_{0};
  std::string failing_path_;    // the segment the recent failures were about
  int permanent_failures_ = 0;  // in a row, for failing_path_
  std::thread thread_;
};

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_SHIPPER_H_
