// A synthetic trace (the mix `tracectl demo` writes) exported to Perfetto and
// decoded against Perfetto's official schema: every packet parses with no
// field Perfetto does not know, every interned id was defined on its
// sequence since that sequence's state was cleared, timestamps replay from
// the sequences' incremental clocks in time (spans' exactly), and what was
// drawn matches the records.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <variant>

#include "analysis/perfetto_writer.h"
#include "daemon/base/overloaded.h"
#include "perfetto_decoder.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::analysis {
namespace {

using testing::DecodedEvent;
using testing::DecodedTrace;

constexpr int kEvents = 50'000;

// What the records hold, counted independently of the writer.
struct Expected {
  std::map<std::string, int> span_begins;  // by name
  int span_ends = 0, instants = 0, counters = 0, samples = 0;
  std::vector<uint64_t> span_times;  // of begins and ends
  uint64_t first_ns = 0, last_ns = 0;
  // (cpu, time, next tid, prev state) and (cpu, time, woken tid, target cpu)
  std::vector<std::tuple<uint32_t, uint64_t, uint32_t, int64_t>> switches;
  std::vector<std::tuple<uint32_t, uint64_t, uint32_t, uint32_t>> wakings;
};

// The mix's records, counted into `expected`; their strings are the generator's.
std::vector<format::Record> Synthetic(synthetic::Trace& generator, Expected& expected) {
  std::vector<format::Record> records = generator.Identity();
  for (int i = 0; i < kEvents; ++i) {
    const format::Record record = generator.Next();
    std::visit(Overloaded{[&](const format::SpanBegin& begin) {
                            ++expected.span_begins[std::string(begin.name)];
                            expected.span_times.push_back(record.time_ns);
                          },
                          [&](const format::SpanEnd&) {
                            ++expected.span_ends;
                            expected.span_times.push_back(record.time_ns);
                          },
                          [&](const format::Instant&) { ++expected.instants; },
                          [&](const format::Counter&) { ++expected.counters; },
                          [&](const format::CpuSample&) { ++expected.samples; },
                          [&](const format::SchedSwitch& sw) {
                            expected.switches.emplace_back(record.cpu, record.time_ns, sw.next_tid,
                                                           sw.prev_state);
                          },
                          [&](const format::SchedWakeup& wakeup) {
                            expected.wakings.emplace_back(record.cpu, record.time_ns,
                                                          wakeup.woken_tid, wakeup.target_cpu);
                          },
                          [](const auto&) {}},
               record.payload);
    if (expected.first_ns == 0) expected.first_ns = record.time_ns;
    expected.last_ns = record.time_ns;
    records.push_back(record);
  }
  return records;
}

std::string Export(const std::vector<format::Record>& records, PerfettoCompression compression) {
  StackProfile stacks;
  std::ostringstream out;
  PerfettoWriter writer(out, compression, stacks);
  writer.Start(records.front().time_ns, 1'700'000'000'000'000'000);
  for (const format::Record& record : records) writer.Add(record);
  writer.Finish();
  EXPECT_EQ(writer.bytes_written(), out.str().size());
  return out.str();
}

TEST(PerfettoOfficialDecodeTest, SyntheticTraceDecodesWithPerfettosSchema) {
  synthetic::Trace generator;
  Expected expected;
  const std::vector<format::Record> records = Synthetic(generator, expected);
  const DecodedTrace trace = testing::DecodePerfetto(Export(records, PerfettoCompression::kNone));

  ASSERT_EQ(trace.problems, std::vector<std::string>{});
  EXPECT_EQ(trace.compressed_packets, 0u);
  EXPECT_EQ(trace.realtime_at_start_ns, 1'700'000'000'000'000'000u);
  std::map<std::string, int> span_begins;
  int span_ends = 0, instants = 0, counters = 0, begins = 0, ends = 0;
  std::vector<uint64_t> span_times;
  for (const DecodedEvent& event : trace.events) {
    EXPECT_GE(event.time_ns, expected.first_ns - 1'000'000'000) << event.name;
    EXPECT_LE(event.time_ns, expected.last_ns) << event.name;
    const bool on_thread = trace.tracks.at(event.track).tid != 0;
    begins += event.type == "TYPE_SLICE_BEGIN";
    ends += event.type == "TYPE_SLICE_END";
    if (event.type == "TYPE_SLICE_BEGIN" && on_thread) ++span_begins[event.name];
    if (event.type == "TYPE_SLICE_END" && on_thread) ++span_ends;
    if (event.type.starts_with("TYPE_SLICE") && on_thread) span_times.push_back(event.time_ns);
    if (event.type == "TYPE_INSTANT" && event.name == "response") {
      ++instants;
      EXPECT_TRUE(event.args.contains("status") && event.args.contains("bytes") &&
                  event.args.contains("cached"));
    }
    if (event.type == "TYPE_COUNTER") {
      ++counters;
      EXPECT_EQ(trace.tracks.at(event.track).name, "queue_depth");
    }
  }
  EXPECT_EQ(span_begins, expected.span_begins);
  EXPECT_EQ(span_ends, expected.span_ends);
  // Each thread's spans are on a sequence of their own: their times replay exactly.
  std::sort(span_times.begin(), span_times.end());
  std::sort(expected.span_times.begin(), expected.span_times.end());
  EXPECT_EQ(span_times, expected.span_times);
  EXPECT_EQ(instants, expected.instants);
  EXPECT_EQ(counters, expected.counters);
  int opened = 0;
  for (const auto& [name, count] : expected.span_begins) opened += count;
  // Every slice ends but the spans still open when the trace stops.
  EXPECT_EQ(begins - ends, opened - expected.span_ends);
  ASSERT_EQ(trace.samples.size(), static_cast<size_t>(expected.samples));
  for (const testing::DecodedSample& sample : trace.samples) {
    EXPECT_GE(sample.frames.size(), 10u);  // the mix's stacks are 10 to 30 deep
  }
  // Every switch and wakeup is in the scheduling data, at its time and on
  // its CPU, and the threads it switches to are named there.
  ASSERT_FALSE(expected.switches.empty());
  ASSERT_FALSE(expected.wakings.empty());
  decltype(expected.switches) switches;
  size_t named = 0;
  for (const testing::DecodedSwitch& sw : trace.switches) {
    switches.emplace_back(sw.cpu, sw.time_ns, sw.next_tid, sw.prev_state);
    if (!sw.next_comm.empty()) ++named;
  }
  decltype(expected.wakings) wakings;
  for (const testing::DecodedWaking& waking : trace.wakings) {
    wakings.emplace_back(waking.cpu, waking.time_ns, waking.tid, waking.target_cpu);
  }
  std::sort(expected.switches.begin(), expected.switches.end());
  std::sort(switches.begin(), switches.end());
  std::sort(expected.wakings.begin(), expected.wakings.end());
  std::sort(wakings.begin(), wakings.end());
  EXPECT_EQ(switches, expected.switches);
  EXPECT_EQ(wakings, expected.wakings);
  EXPECT_GT(named, switches.size() / 2);  // all but the idle task's
}

// Deflated, the same packets in the same order: what the compressed
// packets inflate to is byte for byte the uncompressed export (an export is
// the same bytes every time), in batches under Perfetto's 512 KiB each.
TEST(PerfettoOfficialDecodeTest, DeflatedExportInflatesToTheSameTrace) {
  synthetic::Trace generator;
  Expected expected;
  const std::vector<format::Record> records = Synthetic(generator, expected);
  const std::string plain = Export(records, PerfettoCompression::kNone);
  const std::string deflated = Export(records, PerfettoCompression::kDeflate);
  const DecodedTrace from_plain = testing::DecodePerfetto(plain);
  const DecodedTrace trace = testing::DecodePerfetto(deflated);

  ASSERT_EQ(trace.problems, std::vector<std::string>{});
  EXPECT_GE(trace.compressed_packets, plain.size() / PerfettoDeflate::kBatchBytes);
  EXPECT_EQ(trace.inflated.size(), plain.size());
  EXPECT_TRUE(trace.inflated == plain);  // (a diff of a megabyte would not help)
  EXPECT_EQ(trace.packets, from_plain.packets);
  EXPECT_EQ(trace.events.size(), from_plain.events.size());
  EXPECT_EQ(trace.samples.size(), from_plain.samples.size());
  EXPECT_EQ(trace.switches.size(), from_plain.switches.size());
  EXPECT_LT(deflated.size(), plain.size() / 2);
}

}  // namespace
}  // namespace loupe::analysis
