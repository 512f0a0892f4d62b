// Reads one segment file, record by record, in the order written. A cut or
// damaged file yields every record of its whole frames and then says
// precisely what was wrong and where; a file without a trailer reads as
// incomplete (its writer crashed or is still writing).
#ifndef LOUPE_DAEMON_FORMAT_SEGMENT_READER_H_
#define LOUPE_DAEMON_FORMAT_SEGMENT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/format/block_decoder.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/intern_tables.h"
#include "daemon/format/record.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::format {

// Reading a segment costs memory in proportion to the file, never to what
// its bytes claim: one frame's content, and everything decoded from the
// segment (strings, stacks, header, symbols, trailer), are each held to
// kDecodedBytesPerFileByte times the bytes of the file read so far, and at
// least kMinDecodeBound (a frame also to kMaxDecompressedFrame). Past that
// the segment is damaged: reading stops there with a problem, having
// allocated nothing for it. The writer's segments stay far below: its blocks
// hold at most 16 MiB of raw columns and its frames compress by far less.
inline constexpr uint64_t kMinDecodeBound = 32 << 20;
inline constexpr uint64_t kDecodedBytesPerFileByte = 256;

class SegmentReader {
 public:
  // Fails when the file cannot be opened, is not a regular file (a fifo, a
  // device, a directory: refused without reading or waiting), or does not
  // begin with a readable signature and header: then there is nothing to
  // read from it.
  // `read_chunk`: bytes read from the file at a time; small when only the
  // header is wanted (the shipper reads nothing else).
  static absl::StatusOr<std::unique_ptr<SegmentReader>> Open(const std::string& path,
                                                             size_t read_chunk = 1 << 20);

  const std::string& path() const { return path_; }
  const v1::SegmentHeader& header() const { return header_; }

  // The next record, or false once the file is exhausted or unreadable.
  // The record's views stay valid until the next call.
  bool Next(Record* record);

  // Known once Next() has returned false.
  bool has_trailer() const { return has_trailer_; }
  const v1::SegmentTrailer& trailer() const { return trailer_; }
  const v1::SymbolTable& symbols() const { return symbols_; }
  // What went wrong while reading, each naming the file and byte offset.
  const std::vector<std::string>& problems() const { return problems_; }
  // Sealed with a complete verdict and read without problems.
  bool complete() const;
  uint64_t records_read() const { return records_read_; }
  // File offset just past the frame that the last record came from.
  uint64_t frame_end_offset() const { return file_offset_; }
  uint64_t unknown_records_skipped() const { return decoder_.skipped_unknown(); }

 private:
  SegmentReader(std::string path, ScopedFd fd, size_t read_chunk);

  enum class Step { kFrame, kEnd, kBroken };
  // Reads the next whole frame's payload into frame_payload_.
  Step ReadFrame();
  bool Fill(size_t wanted);  // makes `wanted` bytes available if the file has them
  bool HandleFrame();        // false when the file cannot be read further
  // Checks the frame's number against the one expected: the next one; one
  // read already (skipped); or one further on (reading stops: what follows
  // may depend on what is missing). Either of the latter is a problem.
  enum class FrameOrder { kNext, kRepeat, kGap };
  FrameOrder CheckFrameNumber(std::string_view body);
  // What may be decoded once the file has been read up to `file_bytes`.
  static uint64_t DecodeBound(uint64_t file_bytes);
  // Accounts a protobuf frame body before it is parsed; false (with a
  // problem) when parsing it would go past the bound.
  bool Afford(const google::protobuf::Descriptor& type, std::string_view body,
              std::string_view what);
  void Problem(uint64_t offset, std::string_view what);

  std::string path_;
  ScopedFd fd_;
  size_t read_chunk_;
  bool eof_ = false;
  std::string buffer_;  // file bytes not yet consumed start at buffer_pos_
  size_t buffer_pos_ = 0;
  uint64_t file_offset_ = 0;  // file offset of buffer_[buffer_pos_]
  uint64_t frame_offset_ = 0;
  FrameDecompressor decompressor_;
  std::string frame_payload_;

  v1::SegmentHeader header_;
  v1::SegmentTrailer trailer_;
  v1::SymbolTable symbols_;
  bool has_trailer_ = false;
  bool done_ = false;
  bool numbered_frames_ = false;  // the header says every frame states its number
  uint64_t next_frame_number_ = 1;
  uint64_t decoded_bytes_ = 0;  // header, symbols, trailer (the tables count their own)
  std::vector<std::string> problems_;

  InternTables tables_;
  BlockDecoder decoder_{&tables_};
  bool in_block_ = false;
  uint64_t records_read_ = 0;
};

// What evicting a segment loses: its records, and the evictions it was the
// one to report (they are carried to the next report, or would vanish).
struct SegmentTally {
  uint64_t records = 0;           // every record but eviction reports
  uint64_t evicted_reported = 0;  // events it reports as evicted before it
};
void AddToTally(const Record& record, SegmentTally* tally);
// Reads a whole segment to tally it; a damaged one tallies what was readable.
SegmentTally TallySegment(const std::string& path);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_SEGMENT_READER_H_
