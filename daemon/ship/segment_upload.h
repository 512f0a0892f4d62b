// Uploads one sealed segment file to a collector, continuing after whatever
// the collector already holds of it, and returns once it is durably stored.
#ifndef LOUPE_DAEMON_SHIP_SEGMENT_UPLOAD_H_
#define LOUPE_DAEMON_SHIP_SEGMENT_UPLOAD_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/ship/collector_connection.h"

namespace loupe::ship {

struct UploadSettings {
  size_t chunk_bytes = 256 << 10;
  uint64_t rate_limit_bytes_per_s = 0;  // 0: as fast as the network goes
  std::chrono::milliseconds timeout{10 * 60 * 1000};
};

struct UploadOutcome {
  dev_t dev = 0;  // the file read (a name can be given to another file since)
  ino_t ino = 0;
  uint64_t size = 0;
  uint64_t resumed_from = 0;  // bytes the collector had already
  uint64_t bytes_sent = 0;
  bool duplicate = false;     // the collector had all of it
  std::string location;
};

// Called with the call's context once it exists, so another thread can
// cancel the upload (shutdown); called with nullptr when the call is over.
using CancelHook = std::function<void(grpc::ClientContext*)>;

// The announcement of the segment at `path`: its header's identity and
// start time, its size and SHA-256. `path` must be a regular file with one
// link, not a symlink (in a shared folder, root ships nothing a member
// points it at).
absl::StatusOr<v1::UploadBegin> DescribeSegment(const std::string& path);

absl::StatusOr<UploadOutcome> UploadSegment(CollectorConnection& connection,
                                            const std::string& path,
                                            const UploadSettings& settings,
                                            const CancelHook& on_call = {});

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_SEGMENT_UPLOAD_H_
