// The segments in a writer's folder that still have to reach a collector:
// sealed files not yet shipped, oldest first and in sequence order within a
// session. The folder itself is the queue, so it survives restarts; a shipped
// segment is deleted, or, when copies are kept, marked under `.shipped/`.
#ifndef LOUPE_DAEMON_SHIP_OUTBOX_H_
#define LOUPE_DAEMON_SHIP_OUTBOX_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace loupe::ship {

struct QueuedSegment {
  std::string path;
  uint64_t size = 0;
};

struct OutboxTotals {
  uint64_t segments = 0;
  uint64_t bytes = 0;
};

class Outbox {
 public:
  Outbox(std::string directory, bool keep_shipped)
      : directory_(std::move(directory)), keep_shipped_(keep_shipped) {}

  // Seals, as they are, active files a crashed run left behind (they read as
  // incomplete), so they are shipped too. Call before any session starts.
  absl::Status RecoverInterrupted() const;
  // The segment to ship next, and what waits in all.
  std::optional<QueuedSegment> Next(OutboxTotals* totals) const;
  // The collector holds it: delete it, or mark the kept copy.
  absl::Status Shipped(const std::string& path) const;
  // The collector refuses it for good: renamed `.rejected`, kept for a person.
  absl::Status Reject(const std::string& path) const;

  // For the writer's eviction: true when `path` is a copy kept after
  // shipping, whose mark is then dropped since the caller deletes the file.
  static bool ReleaseShippedCopy(const std::string& path);

 private:
  std::string directory_;
  bool keep_shipped_;
};

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_OUTBOX_H_
