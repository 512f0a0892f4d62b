// Writes a session's records as rotated, self-contained segment files.
//
// A segment is written as `<session>-<seq>.loupe.active` and renamed to
// `<session>-<seq>.loupe` when sealed (after fsync). Segments rotate by size
// and by age, the folder is kept within a total size by evicting the oldest
// sealed segments, and everything that is lost on the way — evictions,
// failed writes, cut stacks and strings — is counted and reported in the
// trace itself. A file is created at the first record, or at Close if there
// was none: every writer leaves at least one sealed segment.
//
// A write that fails (a full disk, a file size limit) never damages what is
// written: the file is cut back to its last whole frame, the block is
// dropped and its events counted (writer/write_failed), and what the block
// interned is forgotten, so no later block depends on it. The count goes
// into the next block and the trailer, and writing goes on when space
// returns. A trailer that cannot be written is tried again; the segment
// stays open (and .active) meanwhile.
//
// A writer acting for a caller works with the caller's rights: the folder is
// checked, listed and created, and segments are created, renamed and
// evicted, with the caller's file credentials, so the files belong to the
// caller. The budget is the folder's (directory_budget.h), shared with every
// other writer of the same louped there.
#ifndef LOUPE_DAEMON_FORMAT_SEGMENT_WRITER_H_
#define LOUPE_DAEMON_FORMAT_SEGMENT_WRITER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/base/credentials.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/format/block_encoder.h"
#include "daemon/format/directory_budget.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/record.h"
#include "daemon/format/segment_reader.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::format {

struct WriterOptions {
  std::string directory;
  std::string session_id;  // [A-Za-z0-9_.-]+, names the files
  // A new session: files of its id already in the folder are another run's
  // (a reused --session-id), which read with it would pass for one session
  // with a hole in it. Refused. Unset: numbering goes on after them.
  bool new_session = false;
  uint64_t max_file_size = 64ull << 20;
  uint64_t rotation_period_ns = 60'000'000'000;  // 0: rotate by size only
  // The folder's: all sealed segments of this writer identity there, plus
  // room for every writer's active file.
  uint64_t max_total_size = 1ull << 30;
  int zstd_level = 3;
  size_t block_bytes = 1 << 20;                    // raw column bytes per block
  uint64_t block_flush_period_ns = 1'000'000'000;  // bounds what a crash can lose
  // Asked of a sealed segment about to be evicted: true when a collector
  // holds it (a copy kept after shipping), so evicting it loses nothing.
  std::function<bool(const std::string& path)> shipped;

  // Whose rights every file operation uses; unset or root: louped's own.
  std::optional<Credentials> credentials;
  // Mode of segment files (the umask applies): 0640 lets the owner's group
  // read them, 0600 only the owner.
  uint32_t file_mode = 0640;
  // Names this writer in every segment header: a folder's budget evicts
  // only segments of its own identity (host and writer_id). Empty: the
  // embedded writer of this uid ("embedded uid N").
  std::string writer_id;
  // Where the budget of each folder is kept, shared by all writers of one
  // louped; unset: the writer keeps a budget of its own for its folder.
  std::shared_ptr<DirectoryBudgets> budgets;
};

// Checks each option; the message names the key and its allowed range.
absl::Status ValidateWriterOptions(const WriterOptions& options);

struct WriterStats {
  uint64_t events = 0;  // records given to Append (not preambles)
  uint64_t bytes_written = 0;
  uint64_t segments_sealed = 0;
  uint64_t segments_evicted = 0;
  uint64_t events_lost = 0;     // evicted or failed to write
  uint64_t write_failures = 0;  // writes that failed: blocks, headers, trailers
  // The records in this writer's files, as a reader counts them: every
  // record of every block written (preambles and Loss records included),
  // less those of its segments evicted since. By kind, and in all.
  uint64_t records_in_files = 0;
  std::array<uint64_t, kMaxRecordKind + 1> records_by_kind{};
  // In the block being built, not yet in a file.
  uint64_t records_pending = 0;
  // This writer's sealed segments still in the folder (sealed less evicted),
  // and the bytes of those evicted.
  uint64_t segments_in_files = 0;
  uint64_t bytes_evicted = 0;
};

class SegmentWriter {
 public:
  // Called when a new segment opens, before its first record, to append the
  // records that make it readable alone (processes, threads, names) with
  // AppendPreamble.
  using PreambleHook = std::function<void(SegmentWriter&)>;
  // Called when a segment is sealed, for the symbols of the addresses in its
  // stacks (written as the segment's symbol frame, before the trailer).
  using SymbolHook = std::function<v1::SymbolTable()>;

  // `header` supplies identity and settings; the writer fills sequence,
  // format version and clock anchor per segment.
  static absl::StatusOr<std::unique_ptr<SegmentWriter>> Create(WriterOptions options,
                                                               v1::SegmentHeader header,
                                                               PreambleHook preamble = {},
                                                               SymbolHook symbols = {});
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Adds a record; may flush a block or rotate. An error means data could not
  // be written; it has been counted and will be reported in the trace.
  absl::Status Append(const Record& record);
  // Adds a record that describes state rather than an event; only valid from
  // the preamble hook.
  void AppendPreamble(const Record& record);

  // Flushes a block or rotates once their time has come. `now_ns` is
  // CLOCK_MONOTONIC, the clock of record times.
  absl::Status Tick(uint64_t now_ns);
  // A sentence for the trailer of the segment open now (or of the next one):
  // something the session learnt that a reader of the trace must know.
  void AddNote(std::string note) { notes_.push_back(std::move(note)); }
  // A sentence true of the whole session (a probe asked for and not
  // placed): in every segment's trailer, so each still says it alone.
  void AddSessionNote(std::string note) { session_notes_.push_back(std::move(note)); }
  // Seals the open segment (if it holds anything) and reports pending losses.
  // Final: later calls (and the destructor) only retry renames the
  // directory refused, never the hooks, whose owner may be half destroyed.
  absl::Status Close();

  WriterStats stats() const;
  // Every loss this writer's trailers report, by "source/reason"
  // (format::LossKey): those of the segments sealed and still in the folder
  // (an evicted segment's become its segment_evicted count in a later one),
  // and those of the open segment and still waiting for one. After Close,
  // what `tracectl verify` reads in the trailers.
  std::map<std::string, uint64_t> losses() const;
  // The folder as the writer resolved it (symlinks followed).
  const std::string& directory() const { return directory_; }
  // This session's sealed segments still in the folder, oldest first.
  std::vector<std::string> sealed_paths() const { return budget_->SegmentsOf(options_.session_id); }

 private:
  struct LossId {
    LossSource source;
    LossReason reason;
    auto operator<=>(const LossId&) const = default;
  };
  using LossMap = std::map<LossId, uint64_t>;
  // What a sealed segment of this writer holds, taken off the totals when it
  // is evicted.
  struct SealedContent {
    uint64_t bytes = 0;
    std::array<uint64_t, kMaxRecordKind + 1> records_by_kind{};
    LossMap losses;
  };

  SegmentWriter(WriterOptions options, v1::SegmentHeader header, PreambleHook preamble,
                SymbolHook symbols, FrameCompressor compressor);
  // The symbol frame; a table over the room left becomes a note, and its
  // addresses a loss in *losses.
  absl::Status WriteSymbols(LossMap* losses);
  uint64_t TailReserve() const;
  absl::Status OpenDirectory();
  absl::Status OpenSegment(uint64_t first_time_ns);
  // At the start of each block: the preamble if the segment's first block
  // was lost, then the losses not yet in a block.
  void StartBlock(uint64_t time_ns);
  void ResetBlock();
  absl::Status FlushBlock();
  // `final`: no segment follows, so no room is kept for one.
  absl::Status Seal(bool final);
  // A record for which no segment could be opened: counted.
  void Drop(const Record& record);
  absl::Status WriteFrame(const std::string& bytes);
  // Cuts the open file back to `size` bytes (whole frames); false if it
  // could not be, and then the segment is given up (see Abandon).
  bool CutBack(uint64_t size, uint64_t frame_number);
  // Leaves the open file as it is (.active, readable to its last whole
  // frame) and closes it; its losses are reported in the next segment.
  void Abandon();
  bool RetryDue() const;
  void NoteFailure(const absl::Status& status);
  // Renames segments sealed while their directory refused the rename.
  absl::Status RetryRenames();
  void Account(const Record& record, bool preamble);
  void EnforceBudget(bool final);
  // Evictions (by this writer or another) to report in the next segment.
  void RecordEvictions(std::vector<Eviction> evictions);
  v1::SegmentTrailer BuildTrailer(const LossMap& losses) const;
  std::string SegmentPath(uint64_t sequence, bool active) const;

  WriterOptions options_;
  std::string directory_;  // canonical
  std::shared_ptr<DirectoryBudget> budget_;
  bool joined_ = false;  // a member of budget_ until Close
  v1::SegmentHeader header_template_;
  PreambleHook preamble_;
  SymbolHook symbols_;
  FrameCompressor compressor_;
  BlockEncoder encoder_;
  std::string frame_;
  std::string compressed_;

  // The open segment.
  ScopedFd fd_;
  uint64_t sequence_ = 0;
  uint64_t file_size_ = 0;
  uint64_t frame_number_ = 0;  // of the next frame written (the header is frame 0)
  uint64_t segment_start_ns_ = 0;
  uint64_t block_start_ns_ = 0;
  bool in_preamble_ = false;
  bool created_any_ = false;  // a segment file was made (else Close makes one)
  bool needs_preamble_ = false;  // the segment's first block was lost with its preamble
  // Written blocks of the open segment, and (block_*) the block being built:
  // counted into the segment once the block is in the file.
  SegmentTally segment_tally_;
  SegmentTally block_tally_;
  uint64_t first_time_ns_ = 0;
  uint64_t last_time_ns_ = 0;
  uint64_t block_first_time_ns_ = UINT64_MAX;
  uint64_t block_last_time_ns_ = 0;
  uint32_t block_count_ = 0;
  uint64_t raw_bytes_ = 0;
  uint64_t kind_counts_[kMaxRecordKind + 1] = {};        // of blocks written
  uint64_t block_kind_counts_[kMaxRecordKind + 1] = {};  // of the block being built
  uint64_t block_events_ = 0;  // in the block: records neither preamble nor Loss
  LossMap segment_losses_;     // Loss records in blocks written
  LossMap block_losses_;       // Loss records in the block being built
  // Losses of this segment in no block yet (a dropped block's events and
  // the Loss records it held): the next block states them, or the trailer.
  LossMap unwritten_losses_;
  std::vector<std::string> segment_evicted_;
  std::vector<std::string> notes_;  // for the next trailer written
  std::vector<std::string> session_notes_;  // for every trailer
  EncoderTruncations truncations_at_open_;
  // Taken from the symbol hook at the first try to seal, kept for the next.
  std::optional<v1::SymbolTable> symbol_table_;

  // Losses to report in the next segment (they happened between segments).
  LossMap pending_losses_;
  std::vector<std::string> pending_evicted_;  // the most recent kMaxEvictedNames

  // A write failed for want of space: opening a segment and sealing one are
  // tried again from this time (CLOCK_MONOTONIC) on; 0: no wait.
  uint64_t retry_at_ns_ = 0;
  bool seal_failed_ = false;  // the open segment's trailer could not be written
  std::string last_failure_;

  // Losses in the trailers of sealed segments still in the folder, and what
  // each of them holds (by file name).
  LossMap reported_losses_;
  std::map<std::string, SealedContent> sealed_content_;

  // Complete (trailer written) but still named .active: the rename failed.
  // Given to the budget once renamed.
  struct Unrenamed {
    std::string path;  // the sealed name
    uint64_t size = 0;
    uid_t owner = 0;
    SegmentTally tally;
  };
  std::vector<Unrenamed> unrenamed_;
  bool closed_ = false;
  WriterStats stats_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_SEGMENT_WRITER_H_
