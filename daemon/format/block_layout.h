// Field numbers of proto/loupe/v1/trace.proto that the hand-written block
// encoder and decoder use, and the limits both sides agree on.
#ifndef LOUPE_DAEMON_FORMAT_BLOCK_LAYOUT_H_
#define LOUPE_DAEMON_FORMAT_BLOCK_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "daemon/format/record.h"

namespace loupe::format::layout {

// Frame.body
inline constexpr uint32_t kFrameHeader = 1;
inline constexpr uint32_t kFrameEvents = 2;
inline constexpr uint32_t kFrameSymbols = 3;
inline constexpr uint32_t kFrameTrailer = 4;

// The frame number, the same field in the body of every frame after the
// header (EventBlock, SymbolTable, SegmentTrailer, and any kind added later);
// see SegmentHeader.numbered_frames.
inline constexpr uint32_t kFrameNumber = 15;

// EventBlock
inline constexpr uint32_t kBaseTime = 1;
inline constexpr uint32_t kEventCount = 2;
inline constexpr uint32_t kFirstStringId = 3;
inline constexpr uint32_t kStrings = 4;
inline constexpr uint32_t kFirstStackId = 5;
inline constexpr uint32_t kStackDepths = 6;
inline constexpr uint32_t kStackFrameDeltas = 7;
inline constexpr uint32_t kKinds = 8;
inline constexpr uint32_t kTimeDeltas = 9;
inline constexpr uint32_t kTids = 10;
inline constexpr uint32_t kCpus = 11;
inline constexpr uint32_t kCoding = 12;
inline constexpr uint32_t kTimeLowBytes = 13;

// How a block's columns are coded (EventBlock.coding): absent means 1, the
// first coding; 2 adds predictions from BlockContext; this writer writes
// kCoding3 (2, with cpus and wakeup targets coded against the events before).
inline constexpr uint32_t kCoding1 = 1;
inline constexpr uint32_t kCoding2 = 2;
inline constexpr uint32_t kCoding3 = 3;

// The column group of kind k is EventBlock field kGroupFieldBase + k; column
// c (0-based) of a group is its field c + 1.
inline constexpr uint32_t kGroupFieldBase = 16;
inline constexpr int kMaxColumnsPerKind = 7;
// Tids are predicted for events on cpus below this (see EventBlock.tids).
inline constexpr size_t kPredictedCpus = 1024;

inline constexpr uint32_t GroupField(RecordKind kind) {
  return kGroupFieldBase + static_cast<uint32_t>(kind);
}

// Deeper stacks keep their innermost frames; longer strings keep their first
// bytes. Both are counted as losses of detail.
inline constexpr size_t kMaxStackDepth = 512;
inline constexpr size_t kMaxStringBytes = 64 * 1024;
// Fields of one instant event and arguments of one probe.
inline constexpr size_t kMaxFields = 64;
inline constexpr size_t kMaxArgs = 16;

}  // namespace loupe::format::layout

#endif  // LOUPE_DAEMON_FORMAT_BLOCK_LAYOUT_H_
