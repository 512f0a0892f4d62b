// One disk budget per output directory, shared by every writer writing
// there.
//
// max_total_size bounds what one louped keeps in a directory, however many
// sessions write into it: the sealed segments there plus the room each
// writer holds for its open file. When over, the oldest segment goes first,
// whichever session wrote it — but only a segment this louped wrote: named
// like a segment, a regular file, and with this writer identity (host and
// writer_id) in its header. Non-trace files, other daemons' traces and
// segments of earlier formats are never counted nor touched. A writer acting
// for a caller that is not root evicts only the caller's own files, and
// every file operation runs with the caller's credentials.
//
// What a file in the directory says of itself is its owner's word: a member
// of the socket group can copy one of its own segments under any name and
// set its size and times. So a file counts what it takes on disk
// (st_blocks, not st_size: a sparse file claims nothing), goes in the order
// of its header's start time capped by its ctime (which no user can set:
// a file made now cannot pass for one made later), and is removed only with
// its owner's file rights, so even root's session never deletes what the
// owner itself could not.
//
// Every eviction reaches a trace, and only a trace of the file's owner: a
// live session whose segment was evicted by another writer finds it in its
// mailbox (TakeEvictions) and reports it in its next segment; an eviction
// of a segment whose session is no longer writing (ended, or an earlier
// run) is reported by the writer that evicted it. Either only when the
// session's uid owns the evicted file: a tally or session id another user
// wrote into a file of its own never reaches someone else's trace.
#ifndef LOUPE_DAEMON_FORMAT_DIRECTORY_BUDGET_H_
#define LOUPE_DAEMON_FORMAT_DIRECTORY_BUDGET_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/base/credentials.h"
#include "daemon/format/segment_reader.h"

namespace loupe::format {

// Who wrote a segment, from its header: a budget owns only its own.
struct WriterIdentity {
  std::string host;
  std::string writer_id;
  auto operator<=>(const WriterIdentity&) const = default;
};

// One evicted segment and what it lost.
struct Eviction {
  std::string name;    // file name, as a trailer lists it
  SegmentTally tally;  // its records, and the evictions it was the one to report
};

class DirectoryBudget {
 public:
  // `directory` is canonical (no symlinks): one directory, one budget.
  // `realtime` is the wall clock seals are dated by (a test sets it back).
  DirectoryBudget(std::string directory, WriterIdentity identity,
                  std::function<int64_t()> realtime = RealtimeNs)
      : directory_(std::move(directory)),
        identity_(std::move(identity)),
        realtime_(std::move(realtime)) {}
  DirectoryBudget(const DirectoryBudget&) = delete;
  DirectoryBudget& operator=(const DirectoryBudget&) = delete;

  const std::string& directory() const { return directory_; }
  const WriterIdentity& identity() const { return identity_; }

  // The writer of `session` starts writing here, holding `reserve` bytes for
  // its open file. The directory is read as `caller` for segments of this
  // identity not known yet (a caller may not see all of them; the next one
  // who can adds them).
  absl::Status Join(const std::string& session, uint64_t reserve,
                    const std::optional<Credentials>& caller);
  // The writer of `session` is done writing. Returns evictions of its
  // segments it has not taken yet; later ones are reported by their evictor.
  std::vector<Eviction> Leave(const std::string& session);
  // Room held for `session`'s open file (0 once it will write no more).
  void Reserve(const std::string& session, uint64_t bytes);
  // A segment `session` has just sealed, owned by uid `owner`.
  void AddSealed(const std::string& session, const std::string& path, uint64_t size, uid_t owner,
                 const SegmentTally& tally);
  // Evictions of `session`'s segments done by other writers since last asked.
  std::vector<Eviction> TakeEvictions(const std::string& session);

  // Evicts the oldest segments `caller` may remove until the budget's
  // segments plus every writer's reserved room fit `limit`. Returns the
  // evictions `session` is to report: its own, and those of segments no
  // live writer owns, both when of the same uid as the file. A segment
  // `shipped` says a collector holds is removed without loss (`shipped` is
  // asked with louped's own rights: its marks are louped's). Files are
  // checked as `caller` and removed as their owner.
  std::vector<Eviction> Enforce(const std::string& session, uint64_t limit,
                                const std::optional<Credentials>& caller,
                                const std::function<bool(const std::string&)>& shipped);

  // Bytes of known segments and reserved room (for tests and status).
  uint64_t used_bytes() const;
  // Paths of `session`'s segments the budget knows, oldest first.
  std::vector<std::string> SegmentsOf(const std::string& session) const;

 private:
  struct Segment {
    std::string session;
    uint64_t size = 0;
    uid_t owner = 0;
    std::optional<SegmentTally> tally;  // unknown for files found on disk
    // Realtime ns: seal time when added, never before the newest known (a
    // clock set back must not make the newest segment the first to go);
    // when found, the header's start capped by the file's ctime (never its
    // mtime, which the owner sets).
    int64_t order = 0;
  };
  struct Member {
    uid_t uid = 0;  // whose files it writes: only their evictions reach its trace
    uint64_t reserved = 0;
    std::vector<Eviction> mailbox;
  };

  void AddLocked(const std::string& path, Segment segment);
  uint64_t UsedLocked() const;

  static int64_t RealtimeNs();

  const std::string directory_;
  const WriterIdentity identity_;
  const std::function<int64_t()> realtime_;
  mutable std::mutex mutex_;                         // writers seal and evict on their own threads
  std::map<std::string, Segment> segments_;          // by path
  std::set<std::pair<int64_t, std::string>> order_;  // (order, path), oldest first
  uint64_t sealed_bytes_ = 0;
  std::map<std::string, Member> members_;  // by session id
};

// The budgets of one louped (or one embedded tracectl), one per canonical
// directory and writer identity. Writers hold their budget; it lives as
// long as some writer writes in its directory.
class DirectoryBudgets {
 public:
  std::shared_ptr<DirectoryBudget> For(const std::string& canonical_directory,
                                       const WriterIdentity& identity);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, WriterIdentity>, std::weak_ptr<DirectoryBudget>> budgets_;
};

// What the segment file at `path` says of itself, if it is a regular file
// (not followed through a symlink) that reads as a segment; everything from
// the same open file. Read with the thread's current credentials.
struct SegmentFileFacts {
  WriterIdentity identity;
  std::string session;  // the header's session id
  uid_t owner = 0;
  gid_t group = 0;
  uint64_t allocated = 0;  // st_blocks * 512: what it takes on disk, not what it claims
  int64_t start_ns = 0;    // the header's realtime start, capped by the file's ctime
};
std::optional<SegmentFileFacts> ReadSegmentFacts(const std::string& path);

// The file rights of the user owning a file (uid `uid`, group `gid`): the
// caller's own when it is that user, else the user's primary and
// supplementary groups from the user database (none when it has no entry:
// fewer rights, never more). nullopt, no change, for root's and louped's
// own files.
std::optional<Credentials> OwnerCredentials(uid_t uid, gid_t gid,
                                            const std::optional<Credentials>& caller);

// Creates a daemon's own output directory if it is missing, for every
// caller to write into with its own rights: with `group` (the control
// socket's), mode 01770 and that group, so members create files there as
// themselves and the sticky bit keeps them from removing each other's.
// Without a group only root may call, and the directory is made as usual.
// An existing directory is the operator's and is left as it is.
absl::Status PrepareSharedDirectory(const std::string& path, std::optional<gid_t> group);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_DIRECTORY_BUDGET_H_
