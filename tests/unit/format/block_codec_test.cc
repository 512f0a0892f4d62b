// The columnar block encoder and decoder: every record kind survives the
// round trip, the bytes are the EventBlock of trace.proto as protobuf itself
// parses it, and the edge cases of interning and delta encoding hold.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "daemon/format/block_decoder.h"
#include "daemon/format/block_encoder.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/record_json.h"
#include "daemon/format/wire.h"
#include "loupe/v1/trace.pb.h"
#include "tests/support/every_kind.h"

namespace loupe::format {
namespace {

std::string_view FrameBody(const std::string& frame) {
  wire::Cursor cursor(frame);
  uint64_t tag = 0;
  std::string_view body;
  EXPECT_TRUE(cursor.ReadVarint(&tag));
  EXPECT_EQ(tag >> 3, layout::kFrameEvents);
  EXPECT_TRUE(cursor.ReadLengthDelimited(&body));
  return body;
}

// Encodes `records` as blocks of `per_block` records each, decodes them
// back, and returns each decoded record as JSON.
std::vector<std::string> RoundTrip(const std::vector<Record>& records, size_t per_block = 1000) {
  BlockEncoder encoder;
  InternTables tables;
  BlockDecoder decoder(&tables);
  std::vector<std::string> decoded;
  std::string frame;
  for (size_t start = 0; start < records.size(); start += per_block) {
    for (size_t i = start; i < std::min(records.size(), start + per_block); ++i) {
      encoder.Append(records[i]);
    }
    encoder.FinishBlock(&frame);
    EXPECT_TRUE(decoder.Start(FrameBody(frame)).ok()) << decoder.status();
    Record record;
    while (decoder.Next(&record)) decoded.push_back(RecordJson(record));
    EXPECT_TRUE(decoder.status().ok()) << decoder.status();
  }
  return decoded;
}

std::vector<std::string> Json(const std::vector<Record>& records) {
  std::vector<std::string> out;
  for (const Record& record : records) out.push_back(RecordJson(record));
  return out;
}

TEST(BlockCodecTest, EveryKindRoundTrips) {
  const std::vector<Record> records = testing::EveryKind();
  ASSERT_EQ(records.size(), static_cast<size_t>(kMaxRecordKind));
  EXPECT_EQ(RoundTrip(records), Json(records));
  // One block per record: interning has to carry across blocks.
  EXPECT_EQ(RoundTrip(records, 1), Json(records));
}

// A call an exception unwound: its mark round-trips.
TEST(BlockCodecTest, AnUnwoundCallRoundTrips) {
  for (const auto& [by, name] : {std::pair{Unwound::kByException, "exception"},
                                 std::pair{Unwound::kByLongjmp, "longjmp"}}) {
    std::vector<Record> records = testing::EveryKind();
    for (Record& record : records) {
      if (auto* ret = std::get_if<UprobeReturn>(&record.payload)) {
        ret->retval = 0;
        ret->unwound = by;
      }
    }
    const std::vector<std::string> json = Json(records);
    EXPECT_EQ(RoundTrip(records), json);
    const std::string field = std::string("\"unwound\":\"") + name + "\"";
    EXPECT_EQ(std::ranges::count_if(
                  json, [&](const std::string& line) { return line.find(field) != std::string::npos; }),
              1)
        << field;
  }
}

TEST(BlockCodecTest, ProtobufReadsTheHandWrittenBlock) {
  const std::vector<Record> records = testing::EveryKind();
  BlockEncoder encoder;
  for (const Record& record : records) encoder.Append(record);
  std::string frame;
  encoder.FinishBlock(&frame);

  v1::Frame parsed;
  ASSERT_TRUE(parsed.ParseFromString(frame));
  ASSERT_TRUE(parsed.has_events());
  const v1::EventBlock& block = parsed.events();
  EXPECT_EQ(block.event_count(), records.size());
  EXPECT_EQ(block.base_time_ns(), records.front().time_ns);
  ASSERT_EQ(block.kinds_size(), static_cast<int>(records.size()));
  // Coding 3: kind << 1, and 1 when the cpu differs from the event before
  // (0 before the first); only those cpus are in the cpu column.
  std::vector<uint32_t> changed_cpus;
  uint32_t cpu = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const bool changed = records[i].cpu != cpu;
    EXPECT_EQ(block.kinds(static_cast<int>(i)),
              static_cast<uint32_t>(records[i].kind()) << 1 | changed);
    if (changed) changed_cpus.push_back(records[i].cpu);
    cpu = records[i].cpu;
  }
  ASSERT_FALSE(changed_cpus.empty());
  EXPECT_EQ(std::vector<uint32_t>(block.cpus().begin(), block.cpus().end()), changed_cpus);
  EXPECT_EQ(block.coding(), layout::kCoding3);
  EXPECT_EQ(block.first_string_id(), 1u);
  EXPECT_EQ(block.strings(0), "server");
  ASSERT_EQ(block.sched_switch().next_tid_size(), 1);
  EXPECT_EQ(block.sched_switch().next_tid(0), 4002u + 1);  // no wakeup onto its cpu before
  EXPECT_EQ(block.sched_switch().prev_state(0), 2u);
  ASSERT_EQ(block.loss().count_size(), 1);
  EXPECT_EQ(block.loss().count(0), 17u);
  EXPECT_EQ(block.loss().reason(0), static_cast<uint32_t>(v1::RING_FULL));
  ASSERT_EQ(block.usdt().args_size(), 5);
  EXPECT_EQ(block.usdt().args(3), std::numeric_limits<int64_t>::min());
  ASSERT_EQ(block.uprobe_return().unwound_size(), 1);
  EXPECT_EQ(block.uprobe_return().unwound(0), 0u);
  EXPECT_EQ(block.span_begin().span_id(0), 77);   // delta from 0
  EXPECT_EQ(block.span_begin().parent_id(0), 1);  // 77 - 76: no open span predicted it
  // One low time byte per event; the rest of each delta in time_deltas.
  EXPECT_EQ(block.time_delta_low_bytes().size(), records.size());
  EXPECT_EQ(block.time_deltas_size(), static_cast<int>(records.size()));
  // Two stacks (user, kernel), each interned once though used twice.
  EXPECT_EQ(block.stack_depths_size(), 2);
  EXPECT_EQ(block.stack_frame_deltas(0), 0x55d4a2c01234);
}

TEST(BlockCodecTest, TimeGoingBackwardsAndHugeGaps) {
  std::vector<Record> records;
  for (uint64_t t : {uint64_t{1000}, uint64_t{999}, uint64_t{0}, UINT64_MAX, uint64_t{5},
                     UINT64_MAX - 1, uint64_t{1} << 63}) {
    records.push_back(Record{.time_ns = t, .tid = 1, .payload = SpanEnd{t}});
  }
  EXPECT_EQ(RoundTrip(records), Json(records));
}

TEST(BlockCodecTest, EmptyBlockAndSingleEvents) {
  BlockEncoder encoder;
  std::string frame;
  encoder.FinishBlock(&frame);
  InternTables tables;
  BlockDecoder decoder(&tables);
  ASSERT_TRUE(decoder.Start(FrameBody(frame)).ok()) << decoder.status();
  Record record;
  EXPECT_FALSE(decoder.Next(&record));
  EXPECT_TRUE(decoder.status().ok());
  // Each record alone in its block: every prediction starts from nothing.
  const std::vector<Record> records = testing::EveryKind();
  for (const Record& one : records) EXPECT_EQ(RoundTrip({one}), Json({one}));
}

// Codings 2 and 3 predict fields from the thread's switch-outs, wakeups, open
// spans and operations, and from the events before; values far from or next to the prediction, at the
// ends of their range, must come back exactly.
TEST(BlockCodecTest, PredictedFieldsRoundTripAtTheirLimits) {
  constexpr uint64_t kMax = UINT64_MAX;
  std::vector<Record> records;
  uint64_t t = 1000;
  auto add = [&](uint32_t tid, uint32_t cpu, Payload payload) {
    records.push_back(Record{.time_ns = t, .tid = tid, .cpu = cpu, .payload = payload});
    t += 977;
  };
  for (uint32_t tid : {7u, 7u + 1024, UINT32_MAX, 0u}) {  // 7 and 7 + 1024 share a slot
    add(tid, 1, SchedSwitch{.next_tid = 9, .prev_state = UINT32_MAX});
    add(3, 1, SchedWakeup{.woken_tid = tid, .target_cpu = 1});
    add(3, 1, SchedSwitch{.next_tid = tid, .prev_state = 0});  // the one just woken
    // Switched out 3 steps before, woken 2 steps before: as predicted.
    for (OffCpu off : {OffCpu{.duration_ns = 3 * 977, .runq_ns = 2 * 977,
                              .prev_state = UINT32_MAX, .waker_tid = 3},
                       OffCpu{.duration_ns = kMax, .runq_ns = 0, .prev_state = 0,
                              .waker_tid = UINT32_MAX, .operation_id = kMax},
                       OffCpu{.duration_ns = 0, .runq_ns = kMax, .prev_state = 1,
                              .waker_tid = 0, .operation_id = 1}}) {
      add(tid, 1, off);
    }
    add(tid, 2, OperationBegin{.operation_id = kMax, .name = "op"});
    add(tid, 2, OperationBegin{.operation_id = 0, .name = "op"});  // one past kMax, wrapped
    add(tid, 2, SpanBegin{.span_id = 5, .parent_id = 0, .operation_id = 0, .name = "a"});
    add(tid, 2, SpanBegin{.span_id = 6, .parent_id = 5, .operation_id = kMax, .name = "b"});
    add(tid, 2, SpanBegin{.span_id = 7, .parent_id = 7, .operation_id = 3, .name = "self"});
    add(tid, 2, SpanBegin{.span_id = 0, .parent_id = 7, .name = "zero id"});
    add(tid, 2, SpanBegin{.span_id = kMax, .parent_id = 0, .name = "no parent"});
    add(tid, 2, SpanBegin{.span_id = 1, .parent_id = kMax, .name = "wraps"});
    add(tid, 2, SpanBegin{.span_id = kMax, .parent_id = 1, .name = "deeper than kept"});
    for (uint64_t span : {kMax, uint64_t{6}, uint64_t{1}, uint64_t{5}, uint64_t{0}, kMax}) {
      add(tid, 2, SpanEnd{span});  // in order, out of order, never begun
    }
    add(tid, 2, Instant{.name = "i", .operation_id = kMax});
    add(tid, 3, CpuSample{.operation_id = 2});
    add(tid, 3, OperationEnd{0});
    add(tid, 3, OperationEnd{kMax});
    add(tid, 3, OperationEnd{.operation_id = 4, .passed = true});
    add(tid, 5000, SchedSwitch{.next_tid = tid, .prev_state = 1});  // a cpu beyond the tables
    // Coding 3: cpus against the event before, wakeup targets against the
    // waker's cpu.
    add(3, UINT32_MAX, SchedWakeup{.woken_tid = tid, .target_cpu = UINT32_MAX});
    add(3, UINT32_MAX, SchedWakeup{.woken_tid = tid, .target_cpu = 0});
    add(3, 0, SchedWakeup{.woken_tid = tid, .target_cpu = UINT32_MAX});
  }
  EXPECT_EQ(RoundTrip(records), Json(records));
  EXPECT_EQ(RoundTrip(records, 7), Json(records));  // predictions restart at each block
}

TEST(BlockCodecTest, TimeDeltasOfEverySizeAndSign) {
  std::vector<Record> records;
  for (uint64_t step = 0; step < 600; ++step) {
    // Scattered bits, shifted by up to 63: deltas from 0 to huge, both ways.
    const uint64_t t = (step * 0x9e3779b97f4a7c15) >> (step % 64);
    records.push_back(Record{.time_ns = t, .tid = 1, .payload = SpanEnd{step}});
  }
  EXPECT_EQ(RoundTrip(records), Json(records));
}

TEST(BlockCodecTest, CodingsAndTimeBytesAreChecked) {
  const Record record{.time_ns = 5, .tid = 1, .payload = SpanEnd{1}};
  BlockEncoder encoder;
  encoder.Append(record);
  encoder.Append(record);
  std::string frame;
  encoder.FinishBlock(&frame);
  const std::string body(FrameBody(frame));
  auto start = [](const std::string& block) {
    InternTables tables;
    BlockDecoder decoder(&tables);
    return decoder.Start(block);
  };
  ASSERT_TRUE(start(body).ok());
  // A later field overrides: a coding this reader does not know.
  std::string newer = body;
  wire::AppendVarintField(&newer, layout::kCoding, 4);
  EXPECT_NE(start(newer).ToString().find("coding 4; this reader knows 1..3"), std::string::npos);
  // Coding 1 has no low time bytes; coding 2 has one per event.
  std::string older = body;
  wire::AppendVarintField(&older, layout::kCoding, 1);
  EXPECT_EQ(start(older).code(), absl::StatusCode::kDataLoss);
  std::string short_plane = body;
  wire::AppendBytesField(&short_plane, layout::kTimeLowBytes, "x");
  EXPECT_NE(start(short_plane).ToString().find("1 bytes of time low bytes for 2 events"),
            std::string::npos);
}

TEST(BlockCodecTest, StringsEmptyLongAndBinary) {
  const std::string long_string(layout::kMaxStringBytes, 'x');
  const std::string binary("\0\x01\xff\"\\", 5);
  std::vector<Record> records;
  for (std::string_view name : {std::string_view(), std::string_view(long_string),
                                std::string_view(binary), std::string_view("a")}) {
    records.push_back(Record{.time_ns = 1, .payload = OperationBegin{1, name}});
  }
  EXPECT_EQ(RoundTrip(records), Json(records));
}

TEST(BlockCodecTest, OverlongStringIsCutAndCounted) {
  const std::string too_long(layout::kMaxStringBytes + 10, 'y');
  BlockEncoder encoder;
  encoder.Append(Record{.payload = ThreadInfo{1, 1, too_long}});
  EXPECT_EQ(encoder.truncations().strings, 1u);
  std::string frame;
  encoder.FinishBlock(&frame);
  InternTables tables;
  BlockDecoder decoder(&tables);
  ASSERT_TRUE(decoder.Start(FrameBody(frame)).ok());
  Record record;
  ASSERT_TRUE(decoder.Next(&record));
  EXPECT_EQ(std::get<ThreadInfo>(record.payload).name.size(), layout::kMaxStringBytes);
}

TEST(BlockCodecTest, DeepStacksKeepInnermostFramesAndCount) {
  std::vector<uint64_t> deep(layout::kMaxStackDepth), too_deep(layout::kMaxStackDepth + 40);
  for (size_t i = 0; i < too_deep.size(); ++i) {
    too_deep[i] = 0xffffffff81000000 - i * 0x1234567;  // deltas of both signs after wrap
    if (i < deep.size()) deep[i] = i * 0x10001;
  }
  BlockEncoder encoder;
  encoder.Append(Record{.payload = CpuSample{deep, too_deep}});
  EXPECT_EQ(encoder.truncations().stacks, 1u);
  std::string frame;
  encoder.FinishBlock(&frame);
  InternTables tables;
  BlockDecoder decoder(&tables);
  ASSERT_TRUE(decoder.Start(FrameBody(frame)).ok());
  Record record;
  ASSERT_TRUE(decoder.Next(&record));
  const CpuSample& sample = std::get<CpuSample>(record.payload);
  EXPECT_TRUE(
      std::equal(sample.user_stack.begin(), sample.user_stack.end(), deep.begin(), deep.end()));
  ASSERT_EQ(sample.kernel_stack.size(), layout::kMaxStackDepth);
  EXPECT_TRUE(std::equal(sample.kernel_stack.begin(), sample.kernel_stack.end(), too_deep.begin()));
}

TEST(BlockCodecTest, TidPredictionFollowsSwitchesPerCpu) {
  // Events after a switch are attributed to the incoming thread by
  // prediction; explicit tids that differ must still come back exactly.
  std::vector<Record> records = {
      {.time_ns = 1, .tid = 10, .cpu = 0, .payload = SchedSwitch{20, 1}},
      {.time_ns = 2, .tid = 20, .cpu = 0, .payload = SpanEnd{1}},
      {.time_ns = 3, .tid = 30, .cpu = 1, .payload = SpanEnd{2}},
      {.time_ns = 4, .tid = 99, .cpu = 0, .payload = SpanEnd{3}},
      {.time_ns = 5, .tid = 0, .cpu = 0, .payload = SpanEnd{4}},
      {.time_ns = 6, .tid = UINT32_MAX, .cpu = 5000, .payload = SchedSwitch{7, 0}},
      {.time_ns = 7, .tid = 7, .cpu = 5000, .payload = SpanEnd{5}},
  };
  EXPECT_EQ(RoundTrip(records), Json(records));
}

TEST(BlockCodecTest, UnknownKindIsSkippedAndCounted) {
  // A newer writer's kind 99 with its own column group: an older reader skips it.
  std::string block;
  wire::AppendVarintField(&block, layout::kBaseTime, 100);
  wire::AppendVarintField(&block, layout::kEventCount, 2);
  std::string kinds, deltas, tids, cpus;
  wire::AppendVarint(&kinds, 99);
  wire::AppendVarint(&kinds, static_cast<uint32_t>(RecordKind::kSpanEnd));
  for (std::string* column : {&deltas, &tids, &cpus}) {
    wire::AppendVarint(column, 2);
    wire::AppendVarint(column, 2);
  }
  wire::AppendBytesField(&block, layout::kKinds, kinds);
  wire::AppendBytesField(&block, layout::kTimeDeltas, deltas);
  wire::AppendBytesField(&block, layout::kTids, tids);
  wire::AppendBytesField(&block, layout::kCpus, cpus);
  std::string group, span_ids;
  wire::AppendVarint(&span_ids, wire::ZigZag(9));
  wire::AppendBytesField(&group, 1, span_ids);
  wire::AppendBytesField(&block, layout::GroupField(RecordKind::kSpanEnd), group);
  wire::AppendBytesField(&block, layout::kGroupFieldBase + 99, "\x08\x01");

  InternTables tables;
  BlockDecoder decoder(&tables);
  ASSERT_TRUE(decoder.Start(block).ok()) << decoder.status();
  Record record;
  ASSERT_TRUE(decoder.Next(&record));
  EXPECT_EQ(record.kind(), RecordKind::kSpanEnd);
  EXPECT_EQ(record.time_ns, 100u + 1 + 1);  // zigzag 2 is +1, twice
  EXPECT_EQ(std::get<SpanEnd>(record.payload).span_id, 9u);
  EXPECT_FALSE(decoder.Next(&record));
  EXPECT_TRUE(decoder.status().ok());
  EXPECT_EQ(decoder.skipped_unknown(), 1u);
}

TEST(BlockCodecTest, UndefinedStringIdIsAnErrorNotACrash) {
  BlockEncoder encoder;
  encoder.Append(Record{.payload = ThreadInfo{1, 1, "defined-in-block-one"}});
  std::string first, second;
  encoder.FinishBlock(&first);
  encoder.Append(Record{.payload = ThreadInfo{1, 1, "defined-in-block-one"}});
  encoder.FinishBlock(&second);

  InternTables tables;  // block one was never seen
  BlockDecoder decoder(&tables);
  ASSERT_TRUE(decoder.Start(FrameBody(second)).ok());
  Record record;
  EXPECT_FALSE(decoder.Next(&record));
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoder.status().ToString().find("undefined string"), std::string::npos);
}

}  // namespace
}  // namespace loupe::format
