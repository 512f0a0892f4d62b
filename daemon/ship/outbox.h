// The segments in a writer's folder that still have to reach a collector:
// sealed files not yet shipped, oldest first and in sequence order within a
// session. The folder itself is the queue, so it survives restarts; a shipped
// segment is deleted, or, when copies are kept, marked under `.shipped/`.
//
// The folder is shared (01770, the socket group's): any member may put
// files there, so root's shipper takes only regular files with one link,
// opened without following a symlink; `.shipped/` must be louped's own
// (mode 0700; one someone else made, or a symlink, is refused), and a mark
// holds the identity (device, inode, size) of the file shipped, so a file
// put in its place later is neither taken for shipped nor deleted.
#ifndef LOUPE_DAEMON_SHIP_OUTBOX_H_
#define LOUPE_DAEMON_SHIP_OUTBOX_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace loupe::ship {

// Which file a name held: a file put in its place later is another one.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
  bool operator==(const FileId&) const = default;
};

struct QueuedSegment {
  std::string path;
  uint64_t size = 0;
  FileId id;
};

struct OutboxTotals {
  uint64_t segments = 0;
  uint64_t bytes = 0;
};

class Outbox {
 public:
  Outbox(std::string directory, bool keep_shipped)
      : directory_(std::move(directory)), keep_shipped_(keep_shipped) {}

  // With kept copies, makes `.shipped/` (louped's, 0700) or checks that the
  // one there is louped's own directory; refuses one of another owner or a
  // symlink. Call at start, before anything else.
  absl::Status Prepare() const;
  // Seals, as they are, active files a crashed run left behind (they read as
  // incomplete), so they are shipped too; never over an existing file. Call
  // before any session starts.
  absl::Status RecoverInterrupted() const;
  // The segment to ship next, and what waits in all.
  std::optional<QueuedSegment> Next(OutboxTotals* totals) const;
  // The collector holds the file `uploaded`, read from `path`: delete it,
  // or mark the kept copy; only if `path` still is that file.
  absl::Status Shipped(const std::string& path, const FileId& uploaded) const;
  // The collector refuses it for good: renamed `.rejected`, kept for a person.
  absl::Status Reject(const std::string& path) const;

  // For the writer's eviction: true when `path` is a copy kept after
  // shipping (the very file marked), whose mark is then dropped since the
  // caller deletes the file. Call with louped's own rights.
  static bool ReleaseShippedCopy(const std::string& path);

 private:
  std::string directory_;
  bool keep_shipped_;
};

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_OUTBOX_H_
