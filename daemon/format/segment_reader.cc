#include "daemon/format/segment_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/base/status_util.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/frame_body.h"
#include "daemon/format/parsed_size.h"
#include "daemon/format/wire.h"

namespace loupe::format {

void AddToTally(const Record& record, SegmentTally* tally) {
  const Loss* loss = std::get_if<Loss>(&record.payload);
  if (loss != nullptr && loss->reason == LossReason::kSegmentEvicted) {
    tally->evicted_reported += loss->count;
  } else {
    ++tally->records;
  }
}

namespace {

// The value of varint field `number` at the top level of a message; 0 when
// it is absent (or the message cannot be walked).
uint64_t TopLevelVarint(std::string_view message, uint32_t number) {
  wire::Cursor cursor(message);
  while (!cursor.empty()) {
    uint64_t tag, value;
    if (!cursor.ReadVarint(&tag)) return 0;
    if ((tag >> 3) == number && (tag & 7) == wire::kVarint) {
      return cursor.ReadVarint(&value) ? value : 0;
    }
    if (!cursor.Skip(tag & 7)) return 0;
  }
  return 0;
}

std::string_view FileType(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace

SegmentReader::SegmentReader(std::string path, ScopedFd fd, size_t read_chunk)
    : path_(std::move(path)), fd_(std::move(fd)), read_chunk_(read_chunk) {}

absl::StatusOr<std::unique_ptr<SegmentReader>> SegmentReader::Open(const std::string& path,
                                                                   size_t read_chunk) {
  // Non-blocking, so that opening a fifo does not wait for a writer; only
  // regular files are read (TraceReader reads a directory by listing it).
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return ErrnoStatus("open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        fmt::format("{}: not a trace segment: {}, not a regular file", path, FileType(st.st_mode)));
  }
  std::unique_ptr<SegmentReader> reader(new SegmentReader(path, std::move(fd), read_chunk));

  if (!reader->Fill(kSignatureSize)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not a Loupe trace segment (shorter than its signature)", path));
  }
  absl::StatusOr<uint32_t> version =
      ParseSignature(std::string_view(reader->buffer_).substr(0, kSignatureSize));
  if (!version.ok())
    return absl::Status(version.status().code(),
                        fmt::format("{}: {}", path, MessageOf(version.status())));
  reader->buffer_pos_ = kSignatureSize;
  reader->file_offset_ = kSignatureSize;

  uint32_t field = 0;
  std::string_view body;
  if (reader->ReadFrame() != Step::kFrame || !SplitFrame(reader->frame_payload_, &field, &body) ||
      field != layout::kFrameHeader ||
      !reader->Afford(*v1::SegmentHeader::descriptor(), body, "header") ||
      !reader->header_.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    std::string why = reader->problems_.empty() ? "header frame is missing or unreadable"
                                                : reader->problems_.front();
    return absl::DataLossError(fmt::format("{}: {}", path, why));
  }
  reader->numbered_frames_ = reader->header_.numbered_frames();
  return reader;
}

uint64_t SegmentReader::DecodeBound(uint64_t file_bytes) {
  if (file_bytes > UINT64_MAX / kDecodedBytesPerFileByte) return UINT64_MAX;
  return std::max(kMinDecodeBound, file_bytes * kDecodedBytesPerFileByte);
}

bool SegmentReader::Afford(const google::protobuf::Descriptor& type, std::string_view body,
                           std::string_view what) {
  const uint64_t bound = DecodeBound(file_offset_);
  const uint64_t spent = decoded_bytes_ + tables_.bytes();
  const uint64_t room = bound > spent ? bound - spent : 0;
  const std::optional<uint64_t> cost = ParsedSizeBound(type, body, room);
  if (!cost.has_value()) {
    Problem(frame_offset_, fmt::format("corrupt {} frame", what));
    return false;
  }
  if (*cost > room) {
    Problem(frame_offset_,
            fmt::format("damaged: the {} would take over {} bytes once parsed; with the {} bytes "
                        "decoded before it, over the reader's bound of {} for this {}-byte file",
                        what, room, spent, bound, file_offset_));
    return false;
  }
  decoded_bytes_ += *cost;
  return true;
}

SegmentReader::FrameOrder SegmentReader::CheckFrameNumber(std::string_view body) {
  const uint64_t number = TopLevelVarint(body, layout::kFrameNumber);
  const uint64_t expected = next_frame_number_;
  if (number == expected) {
    ++next_frame_number_;
    return FrameOrder::kNext;
  }
  if (number == 0) {
    Problem(frame_offset_, fmt::format("damaged: frame #{} states no frame number, though the "
                                       "header says every frame does",
                                       expected));
    return FrameOrder::kGap;
  }
  if (number < expected) {
    Problem(frame_offset_,
            fmt::format("damaged: frame #{} again where frame #{} was expected (a duplicated or "
                        "reordered frame); skipped",
                        number, expected));
    return FrameOrder::kRepeat;
  }
  Problem(frame_offset_,
          fmt::format("damaged: frame #{} where frame #{} was expected: {} missing or out of order",
                      number, expected,
                      number == expected + 1 ? fmt::format("frame #{} is", expected)
                                             : fmt::format("frames #{} to #{} are", expected,
                                                           number - 1)));
  return FrameOrder::kGap;
}

void SegmentReader::Problem(uint64_t offset, std::string_view what) {
  problems_.push_back(fmt::format("{}: offset {}: {}", path_, offset, what));
}

bool SegmentReader::Fill(size_t wanted) {
  while (buffer_.size() - buffer_pos_ < wanted && !eof_) {
    if (buffer_pos_ > 0) {  // drop what was consumed before growing
      buffer_.erase(0, buffer_pos_);
      buffer_pos_ = 0;
    }
    const size_t have = buffer_.size();
    const size_t chunk = std::max(read_chunk_, wanted - have);
    buffer_.resize(have + chunk);
    ssize_t n;
    do {
      n = ::read(fd_.get(), buffer_.data() + have, chunk);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      if (n < 0) Problem(file_offset_ + have, MessageOf(ErrnoStatus("read", path_)));
      eof_ = true;
      n = 0;
    }
    buffer_.resize(have + static_cast<size_t>(n));
  }
  return buffer_.size() - buffer_pos_ >= wanted;
}

SegmentReader::Step SegmentReader::ReadFrame() {
  frame_offset_ = file_offset_;
  if (!Fill(1)) return Step::kEnd;
  size_t wanted = 0;
  while (true) {
    std::string_view available = std::string_view(buffer_).substr(buffer_pos_);
    size_t frame_size = 0;
    std::string error;
    switch (ScanFrame(available, &frame_size, &error)) {
      case FrameScan::kWhole: {
        absl::Status status = decompressor_.Decompress(
            available.substr(0, frame_size), DecodeBound(file_offset_ + frame_size),
            &frame_payload_);
        buffer_pos_ += frame_size;
        file_offset_ += frame_size;
        if (!status.ok()) {
          Problem(frame_offset_, MessageOf(status));
          return Step::kBroken;
        }
        return Step::kFrame;
      }
      case FrameScan::kNeedMore:
        wanted = available.size() + 1;
        if (!Fill(wanted)) {
          Problem(frame_offset_, fmt::format("truncated: the last frame is cut off after {} bytes",
                                             available.size()));
          return Step::kBroken;
        }
        break;
      case FrameScan::kCorrupt:
        Problem(frame_offset_, fmt::format("corrupt frame: {}", error));
        return Step::kBroken;
    }
  }
}

bool SegmentReader::HandleFrame() {
  uint32_t field = 0;
  std::string_view body;
  if (!SplitFrame(frame_payload_, &field, &body)) {
    Problem(frame_offset_, "corrupt frame: not a Frame message");
    return false;
  }
  if (has_trailer_) {
    Problem(frame_offset_, "data after the trailer");
    return false;
  }
  if (numbered_frames_ && field != layout::kFrameHeader) {
    switch (CheckFrameNumber(body)) {
      case FrameOrder::kNext:
        break;
      case FrameOrder::kRepeat:
        return true;  // read already: skipped
      case FrameOrder::kGap:
        return false;  // what follows may depend on what is missing
    }
  }
  switch (field) {
    case layout::kFrameEvents: {
      const uint64_t bound = DecodeBound(file_offset_);
      tables_.set_limit(bound > decoded_bytes_ ? bound - decoded_bytes_ : 0);
      if (absl::Status status = decoder_.Start(body); !status.ok()) {
        Problem(frame_offset_, MessageOf(status));
        return false;
      }
      in_block_ = true;
      return true;
    }
    case layout::kFrameSymbols:
      if (!Afford(*v1::SymbolTable::descriptor(), body, "symbol table")) return false;
      if (!symbols_.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        Problem(frame_offset_, "corrupt symbol frame");
        return false;
      }
      return true;
    case layout::kFrameTrailer:
      if (!Afford(*v1::SegmentTrailer::descriptor(), body, "trailer")) return false;
      if (!trailer_.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        Problem(frame_offset_, "corrupt trailer frame");
        return false;
      }
      has_trailer_ = true;
      return true;
    case layout::kFrameHeader:
      Problem(frame_offset_, "a second header frame");
      return false;
    default:
      return true;  // a frame kind from a newer writer
  }
}

bool SegmentReader::Next(Record* record) {
  while (!done_) {
    if (in_block_) {
      if (decoder_.Next(record)) {
        ++records_read_;
        return true;
      }
      in_block_ = false;
      if (!decoder_.status().ok()) {
        Problem(frame_offset_, MessageOf(decoder_.status()));
        done_ = true;
        break;
      }
    }
    switch (ReadFrame()) {
      case Step::kFrame:
        if (!HandleFrame()) done_ = true;
        break;
      case Step::kEnd:
        if (!has_trailer_) {
          Problem(file_offset_,
                  "no trailer: the segment was never sealed (writer crashed or "
                  "is still writing)");
        }
        done_ = true;
        break;
      case Step::kBroken:
        done_ = true;
        break;
    }
  }
  return false;
}

bool SegmentReader::complete() const {
  return done_ && has_trailer_ && problems_.empty() && trailer_.verdict() == v1::COMPLETE;
}

SegmentTally TallySegment(const std::string& path) {
  SegmentTally tally;
  absl::StatusOr<std::unique_ptr<SegmentReader>> reader = SegmentReader::Open(path);
  if (!reader.ok()) return tally;
  Record record;
  while ((*reader)->Next(&record)) AddToTally(record, &tally);
  return tally;
}

}  // namespace loupe::format
