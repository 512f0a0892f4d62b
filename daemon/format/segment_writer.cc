#include "daemon/format/segment_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "daemon/base/status_util.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/loss_tally.h"
#include "daemon/format/segment_files.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/wire.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;

// Room kept at the end of a file for the trailer (and symbols, later).
constexpr uint64_t kTrailerReserve = 16 << 10;
// Below this much room a file is sealed rather than given a tiny block.
constexpr uint64_t kMinBlockRoom = 4 << 10;
// A trailer names at most this many evicted segments (the most recent);
// their counts are complete regardless.
constexpr size_t kMaxEvictedNames = 64;
// After a write failed, opening or sealing a segment is tried again this
// much later, not for every event (blocks are tried as they fill).
constexpr uint64_t kRetryPeriodNs = 50'000'000;
// Segment names already taken by files not this writer's that opening a
// segment skips before giving up.
constexpr int kMaxTakenNames = 1024;

uint64_t ReadClock(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

absl::Status OutOfRange(std::string_view key, uint64_t value, std::string_view allowed) {
  return absl::InvalidArgumentError(
      fmt::format("{} = {} is out of range: {}", key, value, allowed));
}

bool ValidSessionId(std::string_view id) {
  return !id.empty() && id.size() <= 128 && id.front() != '.' &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// W_OK|X_OK for the thread's file credentials (AT_EACCESS: the fsuid, not
// the real uid access() checks). Kernels before 5.8 lack faccessat2; then
// creating the first segment is the check.
absl::Status CheckWritable(const std::string& directory) {
  if (syscall(SYS_faccessat2, AT_FDCWD, directory.c_str(), W_OK | X_OK, AT_EACCESS) != 0 &&
      errno != ENOSYS) {
    return ErrnoStatus("write to directory", directory);
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& directory) {
  ScopedFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return ErrnoStatus("fsync", directory);
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateWriterOptions(const WriterOptions& o) {
  if (o.directory.empty()) return absl::InvalidArgumentError("output directory is empty");
  if (!ValidSessionId(o.session_id)) {
    return absl::InvalidArgumentError(fmt::format(
        "session_id '{}' must be 1..128 of [A-Za-z0-9_.-], not starting with '.'", o.session_id));
  }
  if (o.max_file_size < (64 << 10) || o.max_file_size > (16ull << 30)) {
    return OutOfRange("max_file_size", o.max_file_size, "64 KiB .. 16 GiB");
  }
  if (o.max_total_size < 2 * o.max_file_size) {
    return OutOfRange("max_total_size", o.max_total_size,
                      fmt::format("at least 2 x max_file_size ({})", 2 * o.max_file_size));
  }
  if (o.zstd_level < 1 || o.zstd_level > 19) {
    return OutOfRange("zstd_level", static_cast<uint64_t>(o.zstd_level), "1 .. 19");
  }
  if (o.block_bytes < (4 << 10) || o.block_bytes > (16 << 20)) {
    return OutOfRange("block_bytes", o.block_bytes, "4 KiB .. 16 MiB");
  }
  constexpr uint64_t kMs = 1'000'000, kDay = 86'400'000'000'000;
  if (o.rotation_period_ns != 0 &&
      (o.rotation_period_ns < kMs || o.rotation_period_ns > 7 * kDay)) {
    return OutOfRange("rotation_period_ns", o.rotation_period_ns, "0 (off) or 1 ms .. 7 days");
  }
  if (o.block_flush_period_ns < kMs || o.block_flush_period_ns > 60'000 * kMs) {
    return OutOfRange("block_flush_period_ns", o.block_flush_period_ns, "1 ms .. 60 s");
  }
  if ((o.file_mode & ~0666u) != 0 || (o.file_mode & 0600) != 0600) {
    return absl::InvalidArgumentError(fmt::format(
        "file_mode = {:o} is out of range: read-write for the owner, at most 0666", o.file_mode));
  }
  return absl::OkStatus();
}

SegmentWriter::SegmentWriter(WriterOptions options, v1::SegmentHeader header, PreambleHook preamble,
                             SymbolHook symbols, FrameCompressor compressor)
    : options_(std::move(options)),
      header_template_(std::move(header)),
      preamble_(std::move(preamble)),
      symbols_(std::move(symbols)),
      compressor_(std::move(compressor)) {}

// Room kept at the end of a file for what sealing adds: the trailer, and an
// eighth of the file for symbols when there are any.
uint64_t SegmentWriter::TailReserve() const {
  return symbols_ ? std::max(kTrailerReserve, options_.max_file_size / 8) : kTrailerReserve;
}

// The symbol frame, if it fits what is left of the file; a table too big is
// replaced by one that says so (the stacks keep their raw addresses).
absl::Status SegmentWriter::WriteSymbols(LossMap* losses) {
  // The hook hands the segment's stacks over once; a seal tried again
  // writes the same table.
  if (!symbol_table_) symbol_table_ = symbols_();
  v1::SymbolTable& table = *symbol_table_;
  table.set_frame_number(frame_number_);
  std::string frame;
  wire::AppendBytesField(&frame, layout::kFrameSymbols, table.SerializeAsString());
  compressed_.clear();
  if (absl::Status status = compressor_.Compress(frame, &compressed_); !status.ok()) return status;
  if (file_size_ + compressed_.size() + kTrailerReserve > options_.max_file_size) {
    v1::SymbolTable cut;
    cut.set_frame_number(frame_number_);
    cut.add_notes(fmt::format("symbol table of {} addresses ({} bytes) left out: over the file "
                              "size limit",
                              table.addresses_size(), compressed_.size()));
    frame.clear();
    wire::AppendBytesField(&frame, layout::kFrameSymbols, cut.SerializeAsString());
    compressed_.clear();
    if (absl::Status status = compressor_.Compress(frame, &compressed_); !status.ok()) {
      return status;
    }
    (*losses)[{LossSource::kSymbolizer, LossReason::kCapReached}] +=
        static_cast<uint64_t>(table.addresses_size());
  }
  return WriteFrame(compressed_);
}

SegmentWriter::~SegmentWriter() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<SegmentWriter>> SegmentWriter::Create(WriterOptions options,
                                                                     v1::SegmentHeader header,
                                                                     PreambleHook preamble,
                                                                     SymbolHook symbols) {
  if (absl::Status status = ValidateWriterOptions(options); !status.ok()) return status;
  absl::StatusOr<FrameCompressor> compressor = FrameCompressor::Create(options.zstd_level);
  if (!compressor.ok()) return compressor.status();
  if (options.writer_id.empty()) options.writer_id = fmt::format("embedded uid {}", geteuid());
  header.set_session_id(options.session_id);
  header.set_writer_id(options.writer_id);
  std::unique_ptr<SegmentWriter> writer(new SegmentWriter(
      std::move(options), std::move(header), std::move(preamble), std::move(symbols),
      *std::move(compressor)));
  if (absl::Status status = writer->OpenDirectory(); !status.ok()) {
    // No folder, no budget joined: there is nothing to seal, and sealing
    // would write into the unset directory (the root, for root).
    writer->closed_ = true;
    return status;
  }
  return writer;
}

// As the caller: the folder is created if missing and must be writable, so
// a session the caller could not write itself fails at attach, not at its
// first event. Then the folder's budget is joined (its segments already
// there count against it) and this session's numbering continues after any
// of its earlier files.
absl::Status SegmentWriter::OpenDirectory() {
  {
    ScopedFsCredentials as_caller;
    if (absl::Status status = as_caller.Take(options_.credentials); !status.ok()) return status;
    std::error_code error;
    fs::create_directories(options_.directory, error);
    if (error) {
      return absl::PermissionDeniedError(
          fmt::format("create directory {}: {}", options_.directory, error.message()));
    }
    char resolved[PATH_MAX];
    if (realpath(options_.directory.c_str(), resolved) == nullptr) {
      return ErrnoStatus("resolve directory", options_.directory);
    }
    directory_ = resolved;
    if (absl::Status status = CheckWritable(directory_); !status.ok()) return status;
    for (const fs::directory_entry& entry : fs::directory_iterator(directory_, error)) {
      const std::string name = entry.path().filename().string();  // outlives `parsed`
      if (std::optional<SegmentFileName> parsed = ParseSegmentFileName(name);
          parsed && parsed->session == options_.session_id) {
        sequence_ = std::max(sequence_, parsed->sequence + 1);
      }
    }
    if (error) return absl::NotFoundError(fmt::format("list {}: {}", directory_, error.message()));
    if (options_.new_session && sequence_ > 0) {
      return absl::AlreadyExistsError(fmt::format(
          "session id '{}': {} already holds that session's segments, from another run; read "
          "together they would pass for one session: choose another id or another folder",
          options_.session_id, directory_));
    }
  }
  const WriterIdentity identity{header_template_.host(), options_.writer_id};
  budget_ = options_.budgets ? options_.budgets->For(directory_, identity)
                             : std::make_shared<DirectoryBudget>(directory_, identity);
  if (absl::Status status =
          budget_->Join(options_.session_id, options_.max_file_size, options_.credentials);
      !status.ok()) {
    budget_->Leave(options_.session_id);
    return status;
  }
  joined_ = true;
  EnforceBudget(/*final=*/false);
  return absl::OkStatus();
}

std::string SegmentWriter::SegmentPath(uint64_t sequence, bool active) const {
  return fmt::format("{}/{}-{:06}{}", directory_, options_.session_id, sequence,
                     active ? kActiveSuffix : kSealedSuffix);
}

bool SegmentWriter::RetryDue() const {
  return retry_at_ns_ == 0 || ReadClock(CLOCK_MONOTONIC) >= retry_at_ns_;
}

void SegmentWriter::NoteFailure(const absl::Status& status) {
  ++stats_.write_failures;
  retry_at_ns_ = ReadClock(CLOCK_MONOTONIC) + kRetryPeriodNs;
  last_failure_ = std::string(MessageOf(status));
}

absl::Status SegmentWriter::OpenSegment(uint64_t first_time_ns) {
  std::string path;
  ScopedFd fd;
  {
    ScopedFsCredentials as_caller;  // the caller's file, checked with its rights
    if (absl::Status status = as_caller.Take(options_.credentials); !status.ok()) return status;
    // A name someone else took first (in a shared folder another user can
    // predict the next one) is skipped, not a reason to lose every event.
    for (int tries = 0;; ++tries, ++sequence_) {
      path = SegmentPath(sequence_, /*active=*/true);
      struct stat sealed;
      if (lstat(SegmentPath(sequence_, /*active=*/false).c_str(), &sealed) == 0) {
        if (tries < kMaxTakenNames) continue;
        errno = EEXIST;
      } else {
        fd.Reset(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
                        options_.file_mode));
        if (!fd.valid() && errno == EEXIST && tries < kMaxTakenNames) continue;
      }
      if (!fd.valid()) return ErrnoStatus("create segment", path);
      break;
    }
  }
  // Evictions of this session's segments by other writers since the last
  // segment are reported in this one.
  if (joined_) RecordEvictions(budget_->TakeEvictions(options_.session_id));

  v1::SegmentHeader header = header_template_;
  header.set_format_version(kFormatVersion);
  header.set_sequence(sequence_);
  header.set_numbered_frames(true);
  header.mutable_clock()->set_monotonic_ns(ReadClock(CLOCK_MONOTONIC));
  header.mutable_clock()->set_realtime_ns(ReadClock(CLOCK_REALTIME));
  std::string frame;
  wire::AppendBytesField(&frame, layout::kFrameHeader, header.SerializeAsString());
  compressed_ = SignatureFrame();
  if (absl::Status status = compressor_.Compress(frame, &compressed_); !status.ok()) return status;
  if (absl::Status status = WriteAll(fd.get(), compressed_, path); !status.ok()) {
    ::unlink(path.c_str());
    NoteFailure(status);
    return status;
  }

  fd_ = std::move(fd);
  created_any_ = true;
  retry_at_ns_ = 0;
  seal_failed_ = false;
  symbol_table_.reset();
  file_size_ = compressed_.size();
  frame_number_ = 1;
  stats_.bytes_written += file_size_;
  segment_start_ns_ = first_time_ns;
  block_start_ns_ = first_time_ns;
  segment_tally_ = {};
  first_time_ns_ = UINT64_MAX;
  last_time_ns_ = 0;
  block_count_ = 0;
  raw_bytes_ = 0;
  std::fill(std::begin(kind_counts_), std::end(kind_counts_), 0);
  ResetBlock();
  segment_losses_.clear();
  segment_evicted_ = std::move(pending_evicted_);
  pending_evicted_.clear();
  encoder_.StartSegment();
  truncations_at_open_ = encoder_.truncations();
  // Losses that happened while no segment was open are reported here.
  unwritten_losses_ = std::exchange(pending_losses_, {});
  needs_preamble_ = static_cast<bool>(preamble_);
  StartBlock(first_time_ns);
  return absl::OkStatus();
}

void SegmentWriter::StartBlock(uint64_t time_ns) {
  block_start_ns_ = time_ns;
  if (needs_preamble_) {
    needs_preamble_ = false;
    in_preamble_ = true;
    preamble_(*this);
    in_preamble_ = false;
  }
  for (const auto& [id, count] : std::exchange(unwritten_losses_, {})) {
    Record loss{.time_ns = std::max(time_ns, block_start_ns_),
                .payload = Loss{id.source, id.reason, count}};
    encoder_.Append(loss);
    Account(loss, /*preamble=*/false);
  }
}

void SegmentWriter::ResetBlock() {
  std::fill(std::begin(block_kind_counts_), std::end(block_kind_counts_), 0);
  block_tally_ = {};
  block_losses_.clear();
  block_events_ = 0;
  block_first_time_ns_ = UINT64_MAX;
  block_last_time_ns_ = 0;
}

void SegmentWriter::AppendPreamble(const Record& record) {
  Record stamped = record;
  stamped.time_ns = segment_start_ns_;  // state as of the segment's start
  if (encoder_.event_count() == 0) block_start_ns_ = stamped.time_ns;
  encoder_.Append(stamped);
  Account(stamped, /*preamble=*/true);
}

void SegmentWriter::Account(const Record& record, bool preamble) {
  ++block_kind_counts_[static_cast<int>(record.kind())];
  AddToTally(record, &block_tally_);
  block_first_time_ns_ = std::min(block_first_time_ns_, record.time_ns);
  block_last_time_ns_ = std::max(block_last_time_ns_, record.time_ns);
  if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
    block_losses_[{loss->source, loss->reason}] += loss->count;
  } else if (!preamble) {
    ++block_events_;
  }
}

void SegmentWriter::Drop(const Record& record) {
  // What a Loss record says still reaches the trace; an event is counted.
  if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
    pending_losses_[{loss->source, loss->reason}] += loss->count;
    return;
  }
  ++pending_losses_[{LossSource::kWriter, LossReason::kWriteFailed}];
  ++stats_.events_lost;
}

absl::Status SegmentWriter::Append(const Record& record) {
  if (closed_) {
    return absl::FailedPreconditionError(
        fmt::format("session {}: its writer is closed", options_.session_id));
  }
  ++stats_.events;
  absl::Status status;
  if (fd_.valid() && options_.rotation_period_ns != 0 && record.time_ns > segment_start_ns_ &&
      record.time_ns - segment_start_ns_ >= options_.rotation_period_ns &&
      (!seal_failed_ || RetryDue())) {
    status.Update(Seal(/*final=*/false));
  }
  if (!fd_.valid()) {
    // After a write failed for want of room, not tried for every event.
    absl::Status opened =
        RetryDue() ? OpenSegment(record.time_ns)
                   : absl::ResourceExhaustedError(fmt::format(
                         "session {}: waiting for room to write: {}", options_.session_id,
                         last_failure_));
    if (!opened.ok()) {
      Drop(record);
      status.Update(opened);
      return status;
    }
  }
  if (encoder_.event_count() == 0) StartBlock(record.time_ns);
  encoder_.Append(record);
  Account(record, /*preamble=*/false);

  // pending_bytes() walks every column; checking every 64 events is plenty.
  if ((encoder_.event_count() & 63) == 0) {
    const uint64_t room =
        options_.max_file_size - std::min(options_.max_file_size, file_size_ + TailReserve());
    // Raw bytes bound the compressed size, so a block never overruns the file.
    if (encoder_.pending_bytes() >= std::min<uint64_t>(options_.block_bytes, room)) {
      status.Update(FlushBlock());
      if (fd_.valid() && file_size_ + TailReserve() + kMinBlockRoom >= options_.max_file_size &&
          (!seal_failed_ || RetryDue())) {
        status.Update(Seal(/*final=*/false));
      }
    }
  }
  return status;
}

absl::Status SegmentWriter::Tick(uint64_t now_ns) {
  if (!fd_.valid()) return absl::OkStatus();
  // A trailer that could not be written: tried again once it is time.
  if (seal_failed_) return RetryDue() ? Seal(/*final=*/false) : absl::OkStatus();
  if (options_.rotation_period_ns != 0 && now_ns > segment_start_ns_ &&
      now_ns - segment_start_ns_ >= options_.rotation_period_ns) {
    return Seal(/*final=*/false);
  }
  if (encoder_.event_count() > 0 && now_ns > block_start_ns_ &&
      now_ns - block_start_ns_ >= options_.block_flush_period_ns) {
    return FlushBlock();
  }
  return absl::OkStatus();
}

absl::Status SegmentWriter::FlushBlock() {
  const uint32_t records = encoder_.event_count();
  if (records == 0) return absl::OkStatus();
  encoder_.FinishBlock(&frame_, frame_number_);
  compressed_.clear();
  absl::Status status = compressor_.Compress(frame_, &compressed_, encoder_.column_starts());
  if (status.ok()) status = WriteFrame(compressed_);
  if (!status.ok()) {
    // The block is gone, and with it what it interned: the next block
    // defines it again, so nothing written after depends on what is lost.
    encoder_.ForgetLastBlock();
    if (block_events_ > 0) {
      unwritten_losses_[{LossSource::kWriter, LossReason::kWriteFailed}] += block_events_;
    }
    for (const auto& [id, count] : block_losses_) unwritten_losses_[id] += count;
    stats_.events_lost += block_events_;
    // The segment's first block held its preamble: the next one does.
    if (block_count_ == 0 && preamble_) needs_preamble_ = true;
    ResetBlock();
    NoteFailure(status);
    if (!fd_.valid()) {  // given up: the next segment reports it
      for (const auto& [id, count] : std::exchange(unwritten_losses_, {})) {
        pending_losses_[id] += count;
      }
    }
    return status;
  }
  retry_at_ns_ = 0;
  ++block_count_;
  raw_bytes_ += frame_.size();
  for (int kind = 0; kind <= kMaxRecordKind; ++kind) {
    kind_counts_[kind] += block_kind_counts_[kind];
    stats_.records_by_kind[kind] += block_kind_counts_[kind];
  }
  stats_.records_in_files += records;
  segment_tally_.records += block_tally_.records;
  segment_tally_.evicted_reported += block_tally_.evicted_reported;
  for (const auto& [id, count] : block_losses_) segment_losses_[id] += count;
  first_time_ns_ = std::min(first_time_ns_, block_first_time_ns_);
  last_time_ns_ = std::max(last_time_ns_, block_last_time_ns_);
  ResetBlock();
  return absl::OkStatus();
}

absl::Status SegmentWriter::WriteFrame(const std::string& bytes) {
  const std::string path = SegmentPath(sequence_, /*active=*/true);
  absl::Status status = WriteAll(fd_.get(), bytes, path);
  if (!status.ok()) {
    // Cut back a partly written frame so the file stays readable to its end.
    if (!CutBack(file_size_, frame_number_)) {
      return absl::Status(status.code(), fmt::format("{}; then {}", MessageOf(status),
                                                     last_failure_));
    }
    return status;
  }
  file_size_ += bytes.size();
  ++frame_number_;  // a frame that failed was cut away: the next one takes its number
  stats_.bytes_written += bytes.size();
  return absl::OkStatus();
}

bool SegmentWriter::CutBack(uint64_t size, uint64_t frame_number) {
  if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0 ||
      ::lseek(fd_.get(), static_cast<off_t>(size), SEEK_SET) < 0) {
    last_failure_ = MessageOf(ErrnoStatus("truncate after failed write",
                                          SegmentPath(sequence_, /*active=*/true)));
    Abandon();
    return false;
  }
  stats_.bytes_written -= file_size_ - std::min(file_size_, size);
  file_size_ = size;
  frame_number_ = frame_number;
  return true;
}

void SegmentWriter::Abandon() {
  // Its blocks are read as they are, Loss records included; what is in no
  // block yet goes to the next segment.
  for (const auto& [id, count] : segment_losses_) reported_losses_[id] += count;
  segment_losses_.clear();
  for (const auto& [id, count] : std::exchange(unwritten_losses_, {})) {
    pending_losses_[id] += count;
  }
  fd_.Reset();
  ++sequence_;
  seal_failed_ = false;
  needs_preamble_ = false;
  symbol_table_.reset();
}

v1::SegmentTrailer SegmentWriter::BuildTrailer(const LossMap& losses) const {
  v1::SegmentTrailer trailer;
  uint64_t events = 0;
  for (int kind = 1; kind <= kMaxRecordKind; ++kind) {
    if (kind_counts_[kind] == 0) continue;
    v1::KindCount* count = trailer.add_kind_counts();
    count->set_kind(static_cast<v1::RecordKind>(kind));
    count->set_count(kind_counts_[kind]);
    events += kind_counts_[kind];
  }
  trailer.set_event_count(events);
  bool lost = false;
  for (const auto& [key, count] : losses) {
    v1::LossTotal* loss = trailer.add_losses();
    loss->set_source(static_cast<v1::LossSource>(key.source));
    loss->set_reason(static_cast<v1::LossReason>(key.reason));
    loss->set_count(count);
    // Cut content is told but is no loss: the events are all there.
    if (IsCut(key.reason)) continue;
    lost = true;
    trailer.add_reasons(fmt::format("lost {} {} {}: {}", count, LossSourceName(key.source),
                                    key.reason == LossReason::kSegmentEvicted ? "events" : "items",
                                    LossReasonName(key.reason)));
  }
  for (const std::string& name : segment_evicted_) trailer.add_evicted_segments(name);
  for (const std::string& note : session_notes_) trailer.add_notes(note);
  for (const std::string& note : notes_) trailer.add_notes(note);
  trailer.set_verdict(lost ? v1::INCOMPLETE : v1::COMPLETE);
  if (first_time_ns_ != UINT64_MAX) {
    trailer.set_first_time_ns(first_time_ns_);
    trailer.set_last_time_ns(last_time_ns_);
  }
  trailer.set_block_count(block_count_);
  trailer.set_frame_number(frame_number_);
  trailer.set_raw_bytes(raw_bytes_);
  return trailer;
}

absl::Status SegmentWriter::Seal(bool final) {
  if (!fd_.valid()) return absl::OkStatus();
  absl::Status status = FlushBlock();  // a block that fails is counted, the seal goes on
  if (!fd_.valid()) return status;     // given up (the file could not be cut back)

  // The trailer states what the blocks say, and what is in none.
  LossMap losses = segment_losses_;
  for (const auto& [id, count] : unwritten_losses_) losses[id] += count;
  const EncoderTruncations& now = encoder_.truncations();
  const std::pair<LossReason, uint64_t> cuts[] = {
      {LossReason::kStackTruncated, now.stacks - truncations_at_open_.stacks},
      {LossReason::kStringTruncated, now.strings - truncations_at_open_.strings},
      {LossReason::kCapReached, now.lists - truncations_at_open_.lists}};
  for (const auto& [reason, count] : cuts) {
    if (count != 0) losses[{LossSource::kWriter, reason}] += count;
  }
  const uint64_t size_before = file_size_, frame_before = frame_number_;
  // Symbols before the trailer: it counts a cut table.
  absl::Status tail = symbols_ ? WriteSymbols(&losses) : absl::OkStatus();
  if (tail.ok()) {
    std::string frame;
    wire::AppendBytesField(&frame, layout::kFrameTrailer,
                           BuildTrailer(losses).SerializeAsString());
    compressed_.clear();
    tail = compressor_.Compress(frame, &compressed_);
    if (tail.ok()) tail = WriteFrame(compressed_);
  }
  if (!tail.ok()) {
    status.Update(tail);
    // Back to its blocks (without the symbol frame), so that events can
    // follow them: the segment stays open and is sealed once there is room.
    if (!fd_.valid() || !CutBack(size_before, frame_before)) return status;
    NoteFailure(tail);
    if (final) {
      Abandon();  // read as a crash leaves it, until louped seals it
    } else {
      seal_failed_ = true;
    }
    return status;
  }
  retry_at_ns_ = 0;
  seal_failed_ = false;
  symbol_table_.reset();
  // Told in the trailer just written; one added before the first segment
  // opened (at attach) is the first segment's.
  notes_.clear();
  unwritten_losses_.clear();
  segment_losses_.clear();
  for (const auto& [id, count] : losses) reported_losses_[id] += count;
  SealedContent& content =
      sealed_content_[SegmentPath(sequence_, /*active=*/false).substr(directory_.size() + 1)];
  std::copy(std::begin(kind_counts_), std::end(kind_counts_), content.records_by_kind.begin());
  content.losses = std::move(losses);
  content.bytes = file_size_;

  const std::string active = SegmentPath(sequence_, /*active=*/true);
  const std::string sealed = SegmentPath(sequence_, /*active=*/false);
  if (::fsync(fd_.get()) != 0) status.Update(ErrnoStatus("fsync", active));
  struct stat st;
  const uid_t owner = fstat(fd_.get(), &st) == 0 ? st.st_uid : geteuid();
  fd_.Reset();
  unrenamed_.push_back({sealed, file_size_, owner, segment_tally_});
  status.Update(RetryRenames());
  ++stats_.segments_sealed;
  ++sequence_;
  EnforceBudget(final);
  return status;
}

// Keeps the folder within max_total_size (the budget evicts the oldest
// first); `final`: this writer will open no more files, so holds no room.
void SegmentWriter::EnforceBudget(bool final) {
  if (final) budget_->Reserve(options_.session_id, 0);
  RecordEvictions(budget_->Enforce(options_.session_id, options_.max_total_size,
                                   options_.credentials, options_.shipped));
}

void SegmentWriter::RecordEvictions(std::vector<Eviction> evictions) {
  for (Eviction& eviction : evictions) {
    pending_losses_[{LossSource::kWriter, LossReason::kSegmentEvicted}] +=
        eviction.tally.records + eviction.tally.evicted_reported;
    ++stats_.segments_evicted;
    stats_.events_lost += eviction.tally.records;
    // One of this writer's own: what it held is in no file any more (its
    // losses are now part of the evicted count).
    if (auto own = sealed_content_.find(eviction.name); own != sealed_content_.end()) {
      for (int kind = 0; kind <= kMaxRecordKind; ++kind) {
        stats_.records_by_kind[kind] -= own->second.records_by_kind[kind];
        stats_.records_in_files -= own->second.records_by_kind[kind];
      }
      for (const auto& [id, count] : own->second.losses) {
        if ((reported_losses_[id] -= count) == 0) reported_losses_.erase(id);
      }
      stats_.bytes_evicted += own->second.bytes;
      sealed_content_.erase(own);
    }
    pending_evicted_.push_back(std::move(eviction.name));
    if (pending_evicted_.size() > kMaxEvictedNames) {
      pending_evicted_.erase(pending_evicted_.begin());
    }
  }
}

// Renames complete segments to their sealed names, as the caller; the first
// error is returned (the segment stays .active, reading as incomplete,
// until a later try succeeds).
absl::Status SegmentWriter::RetryRenames() {
  absl::Status status;
  if (unrenamed_.empty()) return status;
  ScopedFsCredentials as_caller;
  if (absl::Status taken = as_caller.Take(options_.credentials); !taken.ok()) return taken;
  for (auto it = unrenamed_.begin(); it != unrenamed_.end();) {
    const std::string active = it->path + std::string(kActiveSuffix.substr(kSealedSuffix.size()));
    if (::rename(active.c_str(), it->path.c_str()) != 0) {
      status.Update(ErrnoStatus("rename", active));
      ++it;
      continue;
    }
    status.Update(SyncDirectory(directory_));
    budget_->AddSealed(options_.session_id, it->path, it->size, it->owner, it->tally);
    it = unrenamed_.erase(it);
  }
  return status;
}

absl::Status SegmentWriter::Close() {
  if (closed_) {
    RetryRenames().IgnoreError();  // touches no hook
    return absl::OkStatus();
  }
  closed_ = true;
  absl::Status status = Seal(/*final=*/true);
  RetryRenames().IgnoreError();  // the directory may take renames again by now
  // Done writing here: later evictions of this session's segments are
  // reported by whoever evicts them; those until now are reported below.
  if (joined_) {
    joined_ = false;
    RecordEvictions(budget_->Leave(options_.session_id));
  }
  // Evictions since the last segment still have to reach the trace; and a
  // writer that had nothing to write still leaves one sealed segment, so
  // that an empty trace reads as one.
  if (!pending_losses_.empty() || !created_any_) {
    const uint64_t now = std::max(last_time_ns_, ReadClock(CLOCK_MONOTONIC));
    if (absl::Status opened = OpenSegment(now); opened.ok()) {
      status.Update(Seal(/*final=*/true));
    } else {
      status.Update(opened);
    }
  }
  return status;
}

WriterStats SegmentWriter::stats() const {
  WriterStats stats = stats_;
  stats.records_pending = encoder_.event_count();
  stats.segments_in_files = sealed_content_.size();
  return stats;
}

std::map<std::string, uint64_t> SegmentWriter::losses() const {
  LossMap all = reported_losses_;
  for (const LossMap* more : {&segment_losses_, &block_losses_, &unwritten_losses_,
                              &pending_losses_}) {
    for (const auto& [id, count] : *more) all[id] += count;
  }
  if (fd_.valid()) {  // cuts are counted at the seal
    const EncoderTruncations& now = encoder_.truncations();
    all[{LossSource::kWriter, LossReason::kStackTruncated}] +=
        now.stacks - truncations_at_open_.stacks;
    all[{LossSource::kWriter, LossReason::kStringTruncated}] +=
        now.strings - truncations_at_open_.strings;
    all[{LossSource::kWriter, LossReason::kCapReached}] += now.lists - truncations_at_open_.lists;
  }
  std::map<std::string, uint64_t> by_key;
  for (const auto& [id, count] : all) {
    if (count != 0) by_key[LossKey(id.source, id.reason)] += count;
  }
  return by_key;
}

}  // namespace loupe::format
