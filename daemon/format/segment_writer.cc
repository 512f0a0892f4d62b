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
absl::Status SegmentWriter::WriteSymbols() {
  v1::SymbolTable table = symbols_();
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
    CountLoss(LossSource::kSymbolizer, LossReason::kCapReached,
              static_cast<uint64_t>(table.addresses_size()));
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
  if (absl::Status status = writer->OpenDirectory(); !status.ok()) return status;
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

void SegmentWriter::CountLoss(LossSource source, LossReason reason, uint64_t count) {
  if (count == 0) return;
  (fd_.valid() ? segment_losses_ : pending_losses_)[{source, reason}] += count;
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
    return status;
  }

  fd_ = std::move(fd);
  file_size_ = compressed_.size();
  frame_number_ = 1;
  stats_.bytes_written += file_size_;
  segment_start_ns_ = first_time_ns;
  block_start_ns_ = first_time_ns;
  segment_events_ = 0;
  segment_tally_ = {};
  first_time_ns_ = UINT64_MAX;
  last_time_ns_ = 0;
  block_count_ = 0;
  raw_bytes_ = 0;
  std::fill(std::begin(kind_counts_), std::end(kind_counts_), 0);
  std::fill(std::begin(block_kind_counts_), std::end(block_kind_counts_), 0);
  segment_losses_.clear();
  segment_evicted_ = std::move(pending_evicted_);
  pending_evicted_.clear();
  encoder_.StartSegment();
  truncations_at_open_ = encoder_.truncations();

  if (preamble_) {
    in_preamble_ = true;
    preamble_(*this);
    in_preamble_ = false;
  }
  // Losses that happened while no segment was open are reported here.
  for (const auto& [key, count] : std::exchange(pending_losses_, {})) {
    Record loss{.time_ns = first_time_ns, .payload = Loss{key.source, key.reason, count}};
    encoder_.Append(loss);
    Account(loss, /*preamble=*/false);
  }
  return absl::OkStatus();
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
  if (!preamble) ++segment_events_;
  AddToTally(record, &segment_tally_);
  first_time_ns_ = std::min(first_time_ns_, record.time_ns);
  last_time_ns_ = std::max(last_time_ns_, record.time_ns);
  if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
    segment_losses_[{loss->source, loss->reason}] += loss->count;
  }
}

absl::Status SegmentWriter::Append(const Record& record) {
  if (closed_) {
    return absl::FailedPreconditionError(
        fmt::format("session {}: its writer is closed", options_.session_id));
  }
  absl::Status status;
  if (fd_.valid() && options_.rotation_period_ns != 0 && record.time_ns > segment_start_ns_ &&
      record.time_ns - segment_start_ns_ >= options_.rotation_period_ns) {
    status.Update(Seal(/*final=*/false));
  }
  if (!fd_.valid()) {
    if (absl::Status opened = OpenSegment(record.time_ns); !opened.ok()) {
      CountLoss(LossSource::kWriter, LossReason::kWriteFailed, 1);
      ++stats_.events_lost;
      return opened;
    }
  }
  if (encoder_.event_count() == 0) block_start_ns_ = record.time_ns;
  encoder_.Append(record);
  Account(record, /*preamble=*/false);
  ++stats_.events;

  // pending_bytes() walks every column; checking every 64 events is plenty.
  if ((encoder_.event_count() & 63) == 0) {
    const uint64_t room =
        options_.max_file_size - std::min(options_.max_file_size, file_size_ + TailReserve());
    // Raw bytes bound the compressed size, so a block never overruns the file.
    if (encoder_.pending_bytes() >= std::min<uint64_t>(options_.block_bytes, room)) {
      status.Update(FlushBlock());
      if (file_size_ + TailReserve() + kMinBlockRoom >= options_.max_file_size) {
        status.Update(Seal(/*final=*/false));
      }
    }
  }
  return status;
}

absl::Status SegmentWriter::Tick(uint64_t now_ns) {
  if (!fd_.valid()) return absl::OkStatus();
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
  const uint32_t events = encoder_.event_count();
  if (events == 0) return absl::OkStatus();
  encoder_.FinishBlock(&frame_, frame_number_);
  compressed_.clear();
  absl::Status status = compressor_.Compress(frame_, &compressed_);
  if (status.ok()) status = WriteFrame(compressed_);
  if (!status.ok()) {
    CountLoss(LossSource::kWriter, LossReason::kWriteFailed, events);
    stats_.events_lost += events;
    std::fill(std::begin(block_kind_counts_), std::end(block_kind_counts_), 0);
    return status;
  }
  ++block_count_;
  raw_bytes_ += frame_.size();
  for (int kind = 0; kind <= kMaxRecordKind; ++kind) {
    kind_counts_[kind] += std::exchange(block_kind_counts_[kind], 0);
  }
  return absl::OkStatus();
}

absl::Status SegmentWriter::WriteFrame(const std::string& bytes) {
  const std::string path = SegmentPath(sequence_, /*active=*/true);
  absl::Status status = WriteAll(fd_.get(), bytes, path);
  if (!status.ok()) {
    // Cut back a partly written frame so the file stays readable to its end.
    if (::ftruncate(fd_.get(), static_cast<off_t>(file_size_)) != 0 ||
        ::lseek(fd_.get(), static_cast<off_t>(file_size_), SEEK_SET) < 0) {
      status = ErrnoStatus("truncate after failed write", path);
    }
    return status;
  }
  file_size_ += bytes.size();
  ++frame_number_;  // a frame that failed was cut away: the next one takes its number
  stats_.bytes_written += bytes.size();
  return absl::OkStatus();
}

v1::SegmentTrailer SegmentWriter::BuildTrailer() const {
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
  for (const auto& [key, count] : segment_losses_) {
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
  absl::Status status = FlushBlock();

  const EncoderTruncations& now = encoder_.truncations();
  CountLoss(LossSource::kWriter, LossReason::kStackTruncated,
            now.stacks - truncations_at_open_.stacks);
  CountLoss(LossSource::kWriter, LossReason::kStringTruncated,
            now.strings - truncations_at_open_.strings);
  CountLoss(LossSource::kWriter, LossReason::kCapReached, now.lists - truncations_at_open_.lists);
  if (symbols_) status.Update(WriteSymbols());  // before the trailer: it counts a cut table

  std::string frame;
  wire::AppendBytesField(&frame, layout::kFrameTrailer, BuildTrailer().SerializeAsString());
  compressed_.clear();
  absl::Status trailer_status = compressor_.Compress(frame, &compressed_);
  if (trailer_status.ok()) trailer_status = WriteFrame(compressed_);
  status.Update(trailer_status);  // without it the segment reads as cut short

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
    pending_evicted_.push_back(std::move(eviction.name));
    if (pending_evicted_.size() > kMaxEvictedNames) {
      pending_evicted_.erase(pending_evicted_.begin());
    }
    ++stats_.segments_evicted;
    stats_.events_lost += eviction.tally.records;
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
  // Evictions since the last segment still have to reach the trace.
  if (!pending_losses_.empty()) {
    const uint64_t now = std::max(last_time_ns_, ReadClock(CLOCK_MONOTONIC));
    if (absl::Status opened = OpenSegment(now); opened.ok()) {
      status.Update(Seal(/*final=*/true));
    } else {
      status.Update(opened);
    }
  }
  return status;
}

}  // namespace loupe::format
