#include "daemon/format/leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>

#include "daemon/base/credentials.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/segment_files.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/wire.h"

namespace loupe::format {
namespace {

std::string FdPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

absl::Status WriteAllAt(int fd, std::string_view bytes, uint64_t offset, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// What a leftover holds up to its last whole block.
struct Content {
  bool numbered = false;
  bool sealed = false;  // it has a trailer already (only its rename failed)
  uint64_t end = 0;     // file offset just past its last block (or its header)
  uint64_t blocks = 0;
  uint64_t records = 0;
  uint64_t unknown = 0;  // records of kinds this reader does not know
  uint64_t kinds[kMaxRecordKind + 1] = {};
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::map<std::pair<LossSource, LossReason>, uint64_t> losses;
  std::optional<v1::SymbolTable> symbols;
};

absl::StatusOr<Content> ReadContent(int fd, const std::string& path) {
  absl::StatusOr<std::unique_ptr<SegmentReader>> opened = SegmentReader::Open(FdPath(fd));
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        fmt::format("{}: {}", path, MessageOf(opened.status())));
  }
  SegmentReader& reader = **opened;
  Content content;
  content.numbered = reader.header().numbered_frames();
  content.end = reader.frame_end_offset();  // past the header
  Record record;
  while (reader.Next(&record)) {
    ++content.records;
    ++content.kinds[static_cast<int>(record.kind())];
    content.first_ns = std::min(content.first_ns, record.time_ns);
    content.last_ns = std::max(content.last_ns, record.time_ns);
    if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
      content.losses[{loss->source, loss->reason}] += loss->count;
    }
    // Records come block by block; a new end is a new block.
    if (reader.frame_end_offset() != content.end) {
      content.end = reader.frame_end_offset();
      ++content.blocks;
    }
  }
  content.sealed = reader.has_trailer();
  content.unknown = reader.unknown_records_skipped();
  // The writer writes symbols only after its last block: kept if read.
  const v1::SymbolTable& symbols = reader.symbols();
  if (symbols.addresses_size() > 0 || symbols.mappings_size() > 0 || symbols.notes_size() > 0) {
    content.symbols = symbols;
  }
  return content;
}

}  // namespace

absl::Status SealLeftoverFile(int fd, const std::string& path, std::string_view reason,
                              uint64_t* records) {
  absl::StatusOr<Content> read = ReadContent(fd, path);
  if (!read.ok()) return read.status();
  Content& content = *read;
  if (records != nullptr) *records = content.records;
  if (content.sealed) return absl::OkStatus();  // complete: only the rename is left

  absl::StatusOr<FrameCompressor> compressor = FrameCompressor::Create(3);
  if (!compressor.ok()) return compressor.status();
  std::string tail;
  uint64_t number = 1 + content.blocks;  // the header is frame 0
  if (content.symbols) {
    if (content.numbered) content.symbols->set_frame_number(number);
    ++number;
    std::string frame;
    wire::AppendBytesField(&frame, layout::kFrameSymbols, content.symbols->SerializeAsString());
    if (absl::Status status = compressor->Compress(frame, &tail); !status.ok()) return status;
  }

  v1::SegmentTrailer trailer;
  uint64_t events = 0;
  for (int kind = 1; kind <= kMaxRecordKind; ++kind) {
    if (content.kinds[kind] == 0) continue;
    v1::KindCount* count = trailer.add_kind_counts();
    count->set_kind(static_cast<v1::RecordKind>(kind));
    count->set_count(content.kinds[kind]);
    events += content.kinds[kind];
  }
  trailer.set_event_count(events + content.unknown);
  trailer.add_reasons(std::string(reason));
  for (const auto& [key, count] : content.losses) {
    v1::LossTotal* loss = trailer.add_losses();
    loss->set_source(static_cast<v1::LossSource>(key.first));
    loss->set_reason(static_cast<v1::LossReason>(key.second));
    loss->set_count(count);
    if (IsCut(key.second)) continue;
    trailer.add_reasons(fmt::format(
        "lost {} {} {}: {}", count, LossSourceName(key.first),
        key.second == LossReason::kSegmentEvicted ? "events" : "items", LossReasonName(key.second)));
  }
  // What its writer held but never wrote is not known: incomplete.
  trailer.set_verdict(v1::INCOMPLETE);
  if (content.first_ns != UINT64_MAX) {
    trailer.set_first_time_ns(content.first_ns);
    trailer.set_last_time_ns(content.last_ns);
  }
  trailer.set_block_count(static_cast<uint32_t>(content.blocks));
  if (content.numbered) trailer.set_frame_number(number);
  std::string frame;
  wire::AppendBytesField(&frame, layout::kFrameTrailer, trailer.SerializeAsString());
  if (absl::Status status = compressor->Compress(frame, &tail); !status.ok()) return status;

  // Whatever follows the last whole block (a frame cut short, a symbol
  // frame, garbage) is cut away; then the tail goes on.
  if (::ftruncate(fd, static_cast<off_t>(content.end)) != 0) {
    return ErrnoStatus("cut back to its last whole block", path);
  }
  if (absl::Status status = WriteAllAt(fd, tail, content.end, path); !status.ok()) {
    if (::ftruncate(fd, static_cast<off_t>(content.end)) != 0) {
      // Left as it was found, less what followed its last whole block.
    }
    return status;
  }
  if (::fsync(fd) != 0) return ErrnoStatus("fsync", path);
  return absl::OkStatus();
}

LeftoverReport SealLeftovers(const std::string& directory, const WriterIdentity& identity,
                             std::string_view reason) {
  LeftoverReport report;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(directory.c_str()), closedir);
  if (dir == nullptr) {
    if (errno != ENOENT) report.failures.emplace_back(MessageOf(ErrnoStatus("list", directory)));
    return report;
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir.get())) {
    std::optional<SegmentFileName> parsed = ParseSegmentFileName(entry->d_name);
    if (parsed && parsed->active) names.emplace_back(entry->d_name);
  }
  bool renamed_any = false;
  for (const std::string& name : names) {
    const std::string path = directory + "/" + name;
    const std::optional<SegmentFileName> parsed = ParseSegmentFileName(name);
    // Opened once, not through a symlink, never waiting on a fifo; all that
    // follows is about this very file.
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st;
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
      continue;
    }
    {
      absl::StatusOr<std::unique_ptr<SegmentReader>> header =
          SegmentReader::Open(FdPath(fd.get()), 4096);
      if (!header.ok()) continue;  // nothing says whose it is: left alone
      const v1::SegmentHeader& h = (*header)->header();
      if (h.writer_id().empty() || WriterIdentity{h.host(), h.writer_id()} != identity ||
          h.session_id() != parsed->session || h.sequence() != parsed->sequence) {
        continue;  // not this writer's
      }
    }
    uint64_t records = 0;
    if (absl::Status status = SealLeftoverFile(fd.get(), path, reason, &records); !status.ok()) {
      report.failures.emplace_back(MessageOf(status));
      continue;
    }
    std::string sealed = path;
    sealed.resize(sealed.size() - kActiveSuffix.size() + kSealedSuffix.size());
    {
      // As its owner, and only if the name is still this file's and the
      // sealed name is free.
      ScopedFsCredentials as_owner;
      if (absl::Status status = as_owner.Take(OwnerCredentials(st.st_uid, st.st_gid, {}));
          !status.ok()) {
        report.failures.push_back(fmt::format("{}: {}", path, MessageOf(status)));
        continue;
      }
      struct stat now;
      if (::lstat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
        report.failures.push_back(fmt::format("{}: replaced while it was sealed", path));
        continue;
      }
      if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, sealed.c_str(), RENAME_NOREPLACE) != 0) {
        report.failures.emplace_back(MessageOf(ErrnoStatus("rename sealed leftover", path)));
        continue;
      }
    }
    renamed_any = true;
    report.records += records;
    report.sealed.push_back(std::move(sealed));
  }
  if (renamed_any) {
    ScopedFd dir_fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.valid()) ::fsync(dir_fd.get());
  }
  return report;
}

}  // namespace loupe::format
