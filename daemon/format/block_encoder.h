// Builds columnar event blocks (EventBlock in trace.proto, coding 3) straight
// in wire format. Strings and stacks are interned for a whole segment: a block
// defines the ones it uses first, so blocks decode in order without a
// separate table.
#ifndef LOUPE_DAEMON_FORMAT_BLOCK_ENCODER_H_
#define LOUPE_DAEMON_FORMAT_BLOCK_ENCODER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/format/block_context.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/record.h"
#include "daemon/format/varint_column.h"

namespace loupe::format {

// Details the encoder had to cut to stay within the format's limits.
struct EncoderTruncations {
  uint64_t stacks = 0;
  uint64_t strings = 0;
  uint64_t lists = 0;  // fields or arguments beyond their cap
};

class BlockEncoder {
 public:
  BlockEncoder() = default;
  BlockEncoder(const BlockEncoder&) = delete;
  BlockEncoder& operator=(const BlockEncoder&) = delete;

  void Append(const Record& record);

  uint32_t event_count() const { return event_count_; }
  // Bytes the block holds so far, before compression.
  size_t pending_bytes() const;

  // Writes the block as a serialized `Frame{events}` to *frame (replacing its
  // contents) and starts the next block. Interning carries over.
  // `frame_number`: the frame's place in its file (EventBlock.frame_number);
  // 0 writes none.
  void FinishBlock(std::string* frame, uint64_t frame_number = 0);
  // Where each column of the frame FinishBlock made last begins (ascending
  // offsets into it), for FrameCompressor::Compress to give each its own
  // zstd block.
  const std::vector<size_t>& column_starts() const { return column_starts_; }

  // Takes back the block FinishBlock just made, which could not be stored
  // (a write failed): the strings and stacks it defined are forgotten, and so
  // are the cuts counted in it, so the next block defines them again and no
  // later block refers to what was lost. Only right after FinishBlock.
  void ForgetLastBlock();

  // Forgets interned strings and stacks: the next block starts a segment.
  void StartSegment();

  const EncoderTruncations& truncations() const { return truncations_; }

 private:
  // Transparent, so lookups by view do not build a std::string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  struct StringEq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  struct StackHash {
    using is_transparent = void;
    size_t operator()(Stack frames) const;
  };
  struct StackEq {
    using is_transparent = void;
    bool operator()(Stack a, Stack b) const;
  };
  struct PayloadEncoder;

  uint32_t InternString(std::string_view text);
  uint32_t InternStack(Stack frames);
  VarintColumn* Group(RecordKind kind) { return columns_[static_cast<int>(kind)].data(); }
  void PutValue(VarintColumn* type_column, VarintColumn* value_column, const Value& value);
  size_t GroupSize(int kind) const;

  // Segment-wide interning.
  absl::flat_hash_map<std::string, uint32_t, StringHash, StringEq> string_ids_;
  absl::flat_hash_map<std::vector<uint64_t>, uint32_t, StackHash, StackEq> stack_ids_;

  // The block being built.
  uint64_t base_time_ns_ = 0;
  uint64_t last_time_ns_ = 0;
  uint32_t event_count_ = 0;
  uint32_t first_string_id_ = 1;
  std::string new_strings_;  // already encoded as EventBlock.strings fields
  uint32_t first_stack_id_ = 1;
  VarintColumn stack_depths_;
  VarintColumn stack_frame_deltas_;
  VarintColumn kinds_;
  VarintColumn time_deltas_;  // the zigzag deltas but their low bytes
  std::string time_low_bytes_;  // noise, apart from the rest: a byte plane
  VarintColumn tids_;
  VarintColumn cpus_;  // only where the cpu changed
  uint32_t cpu_ = 0;   // of the event before (0 before the first)
  BlockContext context_;  // what the block's events so far predict
  std::array<std::array<VarintColumn, layout::kMaxColumnsPerKind>, kMaxRecordKind + 1> columns_;
  std::vector<size_t> column_starts_;  // of the last frame

  EncoderTruncations truncations_;
  EncoderTruncations block_truncations_;  // truncations_ when the block being built began
  // The block FinishBlock made last: where its definitions began, and the
  // cuts before it.
  uint32_t last_first_string_id_ = 1;
  uint32_t last_first_stack_id_ = 1;
  EncoderTruncations last_block_truncations_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_BLOCK_ENCODER_H_
