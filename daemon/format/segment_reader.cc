#include "daemon/format/segment_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/base/status_util.h"
#include "daemon/format/block_layout.h"
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


// A Frame message holds exactly one length-delimited body field.
bool SplitFrame(std::string_view payload, uint32_t* field, std::string_view* body) {
  wire::Cursor cursor(payload);
  uint64_t tag;
  if (!cursor.ReadVarint(&tag) || (tag & 7) != wire::kLengthDelimited) return false;
  *field = static_cast<uint32_t>(tag >> 3);
  return cursor.ReadLengthDelimited(body) && cursor.empty();
}

}  // namespace

SegmentReader::SegmentReader(std::string path, ScopedFd fd, size_t read_chunk)
    : path_(std::move(path)), fd_(std::move(fd)), read_chunk_(read_chunk) {}

absl::StatusOr<std::unique_ptr<SegmentReader>> SegmentReader::Open(const std::string& path,
                                                                   size_t read_chunk) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
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
      !reader->header_.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    std::string why = reader->problems_.empty() ? "header frame is missing or unreadable"
                                                : reader->problems_.front();
    return absl::DataLossError(fmt::format("{}: {}", path, why));
  }
  return reader;
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
        absl::Status status =
            decompressor_.Decompress(available.substr(0, frame_size), &frame_payload_);
        buffer_pos_ += frame_size;
        file_offset_ += frame_size;
        if (!status.ok()) {
          Problem(frame_offset_, fmt::format("corrupt frame: {}", MessageOf(status)));
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
  switch (field) {
    case layout::kFrameEvents:
      if (absl::Status status = decoder_.Start(body); !status.ok()) {
        Problem(frame_offset_, MessageOf(status));
        return false;
      }
      in_block_ = true;
      return true;
    case layout::kFrameSymbols:
      if (!symbols_.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        Problem(frame_offset_, "corrupt symbol frame");
        return false;
      }
      return true;
    case layout::kFrameTrailer:
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
