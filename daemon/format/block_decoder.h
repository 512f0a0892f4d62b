// Reads the columnar event blocks that BlockEncoder writes, of every coding
// (EventBlock.coding). Every read is bounds-checked: corrupt input ends the block with an error naming what was
// wrong, never a crash or a runaway loop.
#ifndef LOUPE_DAEMON_FORMAT_BLOCK_DECODER_H_
#define LOUPE_DAEMON_FORMAT_BLOCK_DECODER_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/format/block_context.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/intern_tables.h"
#include "daemon/format/record.h"
#include "daemon/format/wire.h"

namespace loupe::format {

class BlockDecoder {
 public:
  // `tables` is the segment's: the block's new strings and stacks are added to it.
  explicit BlockDecoder(InternTables* tables) : tables_(tables) {}
  BlockDecoder(const BlockDecoder&) = delete;
  BlockDecoder& operator=(const BlockDecoder&) = delete;

  // Starts decoding the body of an EventBlock (the bytes inside Frame.events).
  // Strings and stacks that would take the tables past their limit are
  // refused ("damaged: ...") before anything is allocated.
  absl::Status Start(std::string_view block);

  // Decodes the next record. Returns false at the end of the block or on
  // error; status() tells which. Events of kinds this reader does not know
  // are skipped and counted.
  bool Next(Record* record);
  const absl::Status& status() const { return status_; }
  uint64_t skipped_unknown() const { return skipped_unknown_; }

 private:
  class Column {
   public:
    void Reset(std::string_view bytes = {}) {
      cursor_ = wire::Cursor(bytes);
      last_ = 0;
      present_ = !bytes.empty();
    }
    bool empty() const { return cursor_.empty(); }
    size_t size() const { return cursor_.remaining(); }
    // On exhaustion sets *failed and returns 0; the caller checks once per record.
    uint64_t U(bool* failed) {
      uint64_t v = 0;
      if (!cursor_.ReadVarint(&v)) *failed = true;
      return v;
    }
    uint32_t U32(bool* failed) {
      const uint64_t v = U(failed);
      if (v > UINT32_MAX) *failed = true;
      return static_cast<uint32_t>(v);
    }
    // A column added to the format later: absent from older blocks, read as 0.
    uint64_t Added(bool* failed) { return present_ ? U(failed) : 0; }
    int64_t S(bool* failed) { return wire::UnZigZag(U(failed)); }
    uint64_t D(bool* failed) {  // undoes VarintColumn::PutDelta
      last_ += static_cast<uint64_t>(S(failed));
      return last_;
    }
    // Undo block_encoder.cc's PutResidual and PutPredicted.
    uint64_t Residual(uint64_t predicted, bool* failed) {
      return predicted + static_cast<uint64_t>(S(failed));
    }
    uint32_t Predicted(uint32_t predicted, bool* failed) {
      const uint64_t code = U(failed);
      if (code > uint64_t{UINT32_MAX} + 1) *failed = true;
      return code == 0 ? predicted : static_cast<uint32_t>(code - 1);
    }

   private:
    wire::Cursor cursor_;
    uint64_t last_ = 0;
    bool present_ = false;
  };

  absl::Status ParseLayout(std::string_view block);
  void AddStrings(std::string_view block);
  absl::Status ParseGroup(uint32_t kind, std::string_view group);
  absl::Status DefineStacks(std::string_view depths, std::string_view deltas);
  bool DecodePayload(RecordKind kind, Record* record);
  Value ReadValue(Column& types, Column& values);
  // An operation id: coding 1 a delta in its column, coding 2 a residual.
  uint64_t Operation(Column& column, uint32_t tid);
  std::string_view Str(Column& column);
  Stack StackOf(Column& column);
  bool Fail(absl::Status status);

  InternTables* tables_;
  absl::Status status_;
  bool failed_ = false;  // a read ran out of bounds or met an undefined id

  uint64_t time_ns_ = 0;  // of the event before
  uint32_t cpu_ = 0;      // of the event before, for coding 3
  uint32_t remaining_ = 0;
  uint32_t event_index_ = 0;
  std::string_view time_low_bytes_;  // coding 2: one per event
  uint64_t coding_ = layout::kCoding1;
  uint64_t skipped_unknown_ = 0;
  Column kinds_, time_deltas_, tids_, cpus_;
  BlockContext context_;  // what the block's events so far predict
  std::array<std::array<Column, layout::kMaxColumnsPerKind>, kMaxRecordKind + 1> columns_;

  // Storage behind the spans of the record last returned.
  std::vector<int64_t> args_;
  std::vector<Field> fields_;
  std::vector<uint64_t> scratch_frames_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_BLOCK_DECODER_H_
