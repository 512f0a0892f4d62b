// The session pipeline driven by replayed ring bytes, as the kernel's ring
// would hand them over: time order across drains, off-CPU intervals derived
// from switches and wakeups, and every loss in the trace and in the stats.
// No root, no BPF: records are built with the structs BPF writes.
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include "daemon/format/trace_reader.h"
#include "daemon/session/pipeline.h"
#include "daemon/session/replay_source.h"
#include "daemon/session/ring_capture.h"
#include "shared/records.h"
#include "tests/support/allocation_counter.h"
#include "tests/support/temp_dir.h"

namespace loupe::session {
namespace {

constexpr uint32_t kTarget = 4000;  // tgid; its threads 4000 and 4001
constexpr uint32_t kOther = 9000;   // a process that is not traced
constexpr uint32_t kSleeping = 1;   // TASK_INTERRUPTIBLE

template <typename T>
std::vector<uint8_t> Bytes(T record, uint16_t type, uint64_t time_ns, uint32_t cpu,
                           size_t size = sizeof(T)) {
  record.hdr.type = type;
  record.hdr.size = static_cast<uint16_t>(size);
  record.hdr.cpu = cpu;
  record.hdr.time_ns = time_ns;
  std::vector<uint8_t> bytes(size);
  std::memcpy(bytes.data(), &record, size);
  return bytes;
}

// A switch; the target's side switched out carries a user stack of
// `user_depth` frames (the record is cut after the last one).
std::vector<uint8_t> Switch(uint64_t time_ns, uint32_t cpu, uint32_t prev_tid, uint32_t prev_tgid,
                            uint32_t next_tid, uint32_t next_tgid, uint32_t prev_state,
                            uint16_t user_depth = 0, uint32_t prev_run_delay_ns = 0) {
  loupe_sched_switch record{};
  record.prev_run_delay_ns = prev_run_delay_ns;
  record.prev_tid = prev_tid;
  record.prev_tgid = prev_tgid;
  record.next_tid = next_tid;
  record.next_tgid = next_tgid;
  record.prev_state = prev_state;
  record.user_depth = user_depth;
  if (prev_tgid != kTarget) std::strncpy(record.prev_comm, "other", sizeof record.prev_comm);
  if (next_tgid != kTarget) std::strncpy(record.next_comm, "other", sizeof record.next_comm);
  for (uint16_t i = 0; i < user_depth; ++i) record.frames[i] = 0x401000 + 16 * i;
  return Bytes(record, LOUPE_REC_SCHED_SWITCH, time_ns, cpu,
               offsetof(loupe_sched_switch, frames) + user_depth * sizeof(uint64_t));
}

std::vector<uint8_t> Span(uint16_t type, uint64_t time_ns, uint32_t cpu, uint32_t tid,
                          uint64_t span_id) {
  loupe_shim_event record{};
  record.tid = tid;
  record.tgid = kTarget;
  if (type == LOUPE_REC_SPAN_END) {
    record.args[0] = span_id;
  } else {
    record.args[0] = 0x7000;  // the name's address: not readable here, named as such
    record.args[1] = span_id;
  }
  return Bytes(record, type, time_ns, cpu);
}

std::vector<uint8_t> Wakeup(uint64_t time_ns, uint32_t cpu, uint32_t waker_tid,
                            uint32_t woken_tid) {
  loupe_sched_wakeup record{};
  record.woken_tid = woken_tid;
  record.woken_tgid = kTarget;
  record.waker_tid = waker_tid;
  record.target_cpu = cpu;
  return Bytes(record, LOUPE_REC_SCHED_WAKEUP, time_ns, cpu);
}

std::vector<uint8_t> GroupExit(uint64_t time_ns) {
  loupe_thread_exit record{};
  record.tid = kTarget;
  record.tgid = kTarget;
  record.group_dead = 1;
  return Bytes(record, LOUPE_REC_THREAD_EXIT, time_ns, 0);
}

ProcessIdentity TargetProcess() {
  ProcessIdentity process{.pid = kTarget, .ns_pid = kTarget, .ppid = 1, .name = "replayed"};
  process.threads[kTarget] = {.tid = kTarget, .ns_tid = kTarget, .name = "main"};
  process.threads[kTarget + 1] = {.tid = kTarget + 1, .ns_tid = kTarget + 1, .name = "worker"};
  return process;
}

class PipelineReplayTest : public ::testing::Test {
 protected:
  // Replays `batches` one drain per cycle, `step_ns` apart in the events'
  // clock starting at `first_drain_ns`, then a final cycle; returns the
  // records written, in trace order.
  std::vector<format::Record> Replay(std::vector<RingBatch> batches, uint64_t first_drain_ns,
                                     uint64_t step_ns = 100'000'000) {
    PipelineOptions options;
    options.writer.directory = dir_.path();
    options.writer.session_id = "replay";
    options.symbolize = false;
    options.reorder_window_ns = 50'000'000;
    options.read_asleep = read_asleep_;
    options.asleep_read_budget_ns = asleep_read_budget_ns_;
    options.follow_children = follow_children_;
    options.recording_since_ns = recording_since_ns_;
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
        Pipeline::Create(options, Targets({{kTarget, TargetProcess()}}), v1::SegmentHeader(),
                         &probe_names_, log_, first_drain_ns);
    EXPECT_TRUE(pipeline.ok()) << pipeline.status();
    if (!pipeline.ok()) return {};
    pipeline_ = *std::move(pipeline);
    ReplaySource source(std::move(batches), [this](std::span<const uint8_t> bytes) {
      pipeline_->OnRecord(bytes);
      most_pending_ = std::max(most_pending_, pipeline_->pending_events());
    });
    uint64_t now = first_drain_ns;
    for (size_t drain = 0; !source.exhausted(); ++drain) {
      if (before_drain_) before_drain_(drain);
      EXPECT_TRUE(source.Drain().ok());
      pipeline_->Cycle(now, source.ReadCounters(), /*final=*/false, now);
      now += step_ns;
    }
    source.Detach();
    if (before_drain_) before_drain_(SIZE_MAX);
    pipeline_->Cycle(now, source.ReadCounters(), /*final=*/true, now);
    EXPECT_TRUE(pipeline_->Close(0).ok());
    return ReadBack();
  }

  std::vector<format::Record> ReadBack() {
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      if (entry.path().extension() == ".loupe") paths.push_back(entry.path().string());
    }
    std::sort(paths.begin(), paths.end());
    absl::StatusOr<std::unique_ptr<format::TraceReader>> reader = format::TraceReader::Open(paths);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::vector<format::Record> records;
    format::Record record;
    while (reader.ok() && (*reader)->Next(&record)) {
      // Views die with the reader: keep only what the tests look at.
      if (auto* off = std::get_if<format::OffCpu>(&record.payload)) {
        off_cpu_user_stacks_.emplace_back(off->user_stack.begin(), off->user_stack.end());
        off->user_stack = {};
        off->kernel_stack = {};
      }
      if (std::holds_alternative<format::ThreadInfo>(record.payload) ||
          std::holds_alternative<format::ProcessInfo>(record.payload)) {
        continue;  // the preamble and the names of untraced sides
      }
      records.push_back(record);
    }
    return records;
  }

  template <typename T>
  static std::vector<T> OfKind(const std::vector<format::Record>& records) {
    std::vector<T> out;
    for (const format::Record& record : records) {
      if (const auto* payload = std::get_if<T>(&record.payload)) out.push_back(*payload);
    }
    return out;
  }

  testing::TempDir dir_;
  std::vector<std::string> probe_names_;
  // The user stacks of the off_cpu records replayed, in order (their views die with the reader).
  std::vector<std::vector<uint64_t>> off_cpu_user_stacks_;
  std::shared_ptr<spdlog::logger> log_ =
      std::make_shared<spdlog::logger>("replay", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<Pipeline> pipeline_;
  size_t most_pending_ = 0;  // events waiting in the reorder buffer at most
  // Called before each drain with its index, and with SIZE_MAX before the
  // final cycle.
  std::function<void(size_t)> before_drain_;
  std::function<std::optional<Asleep>(uint32_t pid, uint32_t tid)> read_asleep_;
  bool follow_children_ = false;
  uint64_t recording_since_ns_ = 0;
  uint64_t asleep_read_budget_ns_ = PipelineOptions().asleep_read_budget_ns;
};

TEST_F(PipelineReplayTest, EventsFromTwoCpusComeOutInTimeOrderAcrossDrains) {
  const uint64_t t0 = 1'000'000'000;
  // CPU 1's ring part arrives a drain after CPU 0's, though it is older.
  std::vector<RingBatch> batches(2);
  batches[0].records = {Switch(t0 + 30, 0, kTarget, kTarget, kOther, kOther, 0),
                        Switch(t0 + 50, 0, kOther, kOther, kTarget, kTarget, 0)};
  batches[1].records = {Switch(t0 + 10, 1, kTarget + 1, kTarget, kOther, kOther, 0),
                        Switch(t0 + 40, 1, kOther, kOther, kTarget + 1, kTarget, 0)};
  // The first drain happens within the window of every event.
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 60);
  std::vector<uint64_t> times;
  for (const format::Record& record : records) {
    if (std::holds_alternative<format::SchedSwitch>(record.payload)) times.push_back(record.time_ns);
  }
  EXPECT_EQ(times, (std::vector<uint64_t>{t0 + 10, t0 + 30, t0 + 40, t0 + 50}));
  EXPECT_TRUE(OfKind<format::Loss>(records).empty());
}

// A drain that finds a full ring hands over a second's worth of events at
// once: they leave as they fall out of the window, so no more than a
// window's worth (and one release step) wait in memory at any time.
TEST_F(PipelineReplayTest, ABigDrainHoldsAWindowOfEventsNotTheWholeDrain) {
  const uint64_t t0 = 1'000'000'000;
  constexpr uint64_t kEvents = 40'000, kStepNs = 25'000;  // one second: 40 per window ms
  std::vector<RingBatch> batches(1);
  for (uint64_t i = 0; i < kEvents; ++i) {
    batches[0].records.push_back(Wakeup(t0 + i * kStepNs, static_cast<uint32_t>(i % 2), kTarget,
                                        kTarget + 1));
  }
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + kEvents * kStepNs);
  const size_t window_events = 50'000'000 / kStepNs;
  EXPECT_LE(most_pending_, window_events + 4096);
  EXPECT_GE(most_pending_, window_events);
  std::vector<uint64_t> times;
  for (const format::Record& record : records) {
    if (std::holds_alternative<format::SchedWakeup>(record.payload)) times.push_back(record.time_ns);
  }
  ASSERT_EQ(times.size(), kEvents);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_TRUE(OfKind<format::Loss>(records).empty());
}

// Once running, the pipeline allocates nothing per event: records decode
// into reorder slots that keep their buffers, shim names are views into
// the name cache, off-CPU intervals reuse one event. What may allocate is
// per drain or per new value (a stack or name first seen, a block sealed).
TEST_F(PipelineReplayTest, ARunningPipelineAllocatesNothingPerEvent) {
  const uint64_t t0 = 1'000'000'000;
  constexpr size_t kDrains = 200, kRoundsPerDrain = 250;
  constexpr uint64_t kRoundNs = 200'000, kDrainNs = kRoundsPerDrain * kRoundNs;
  std::vector<RingBatch> batches(kDrains);
  for (size_t drain = 0; drain < kDrains; ++drain) {
    for (size_t round = 0; round < kRoundsPerDrain; ++round) {
      const uint64_t t = t0 + drain * kDrainNs + round * kRoundNs;
      const uint32_t tid = kTarget + static_cast<uint32_t>(round % 2);
      const uint32_t cpu = static_cast<uint32_t>(round % 2);
      batches[drain].records.push_back(Span(LOUPE_REC_SPAN_BEGIN, t, cpu, tid, round + 1));
      batches[drain].records.push_back(
          Switch(t + 1'000, cpu, tid, kTarget, kOther, kOther, kSleeping, /*user_depth=*/12));
      batches[drain].records.push_back(Wakeup(t + 50'000, cpu, kOther, tid));
      batches[drain].records.push_back(Switch(t + 60'000, cpu, kOther, kOther, tid, kTarget, 0));
      batches[drain].records.push_back(Span(LOUPE_REC_SPAN_END, t + 70'000, cpu, tid, round + 1));
    }
  }
  // The first half warms the slots, pools and caches up; the second counts
  // (what a drain may allocate: the losses it reports).
  std::optional<testing::AllocationCounter> counter;
  uint64_t allocations = 0;
  before_drain_ = [&](size_t drain) {
    if (drain == kDrains / 2) counter.emplace();
    if (drain == SIZE_MAX) allocations = counter->count();
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + kDrainNs, kDrainNs);
  // 1,500 events a drain: one allocation per 100 events would be 15.
  const uint64_t counted_drains = kDrains / 2;
  EXPECT_LE(allocations, 2 * counted_drains)
      << allocations << " allocations in " << counted_drains << " drains of "
      << kRoundsPerDrain * 6 << " events";
  EXPECT_EQ(OfKind<format::OffCpu>(records).size(), kDrains * kRoundsPerDrain);
  EXPECT_EQ(OfKind<format::SpanBegin>(records).size(), kDrains * kRoundsPerDrain);
  // The only cut: each span's name, which no process here holds (the
  // events are all there).
  uint64_t unreadable = 0;
  for (const format::Loss& loss : OfKind<format::Loss>(records)) {
    EXPECT_EQ(loss.source, format::LossSource::kShim);
    EXPECT_EQ(loss.reason, format::LossReason::kUnreadable);
    unreadable += loss.count;
  }
  EXPECT_EQ(unreadable, kDrains * kRoundsPerDrain);
}

TEST_F(PipelineReplayTest, AnEventPastItsPlaceIsWrittenAndCountedLate) {
  const uint64_t t0 = 1'000'000'000;
  std::vector<RingBatch> batches(2);
  batches[0].records = {Switch(t0 + 500'000'000, 0, kTarget, kTarget, kOther, kOther, 0)};
  // Older than what the first cycle already wrote (its window has passed).
  batches[1].records = {Switch(t0, 1, kTarget + 1, kTarget, kOther, kOther, 0)};
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 600'000'000);
  EXPECT_EQ(OfKind<format::SchedSwitch>(records).size(), 2u);
  const std::vector<format::Loss> losses = OfKind<format::Loss>(records);
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].source, format::LossSource::kMerge);
  EXPECT_EQ(losses[0].reason, format::LossReason::kLate);
  EXPECT_EQ(losses[0].count, 1u);
  EXPECT_EQ(pipeline_->stats().losses.at("merge/late"), 1u);
}

TEST_F(PipelineReplayTest, SleepWakeupAndSwitchInMakeOneOffCpuInterval) {
  const uint64_t t0 = 2'000'000'000;
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Switch(t0, 0, kTarget + 1, kTarget, kOther, kOther, kSleeping),
      Wakeup(t0 + 4'000, 1, kTarget, kTarget + 1),
      Switch(t0 + 9'000, 0, kOther, kOther, kTarget + 1, kTarget, 0),
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  const std::vector<format::OffCpu> intervals = OfKind<format::OffCpu>(records);
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(intervals[0].duration_ns, 9'000u);
  EXPECT_EQ(intervals[0].runq_ns, 5'000u);  // woken at +4 µs, ran at +9 µs
  EXPECT_EQ(intervals[0].waker_tid, kTarget);
  EXPECT_EQ(intervals[0].prev_state, kSleeping);
}

// The worker never switched while traced and sleeps when tracing stops: it
// slept all along, which one off_cpu record from the trace's start says.
// The main thread switched, so it is not asked about.
TEST_F(PipelineReplayTest, AThreadAsleepAllAlongHasItsWaitInTheTrace) {
  const uint64_t t0 = 2'000'000'000;
  std::vector<uint32_t> asked;
  read_asleep_ = [&](uint32_t pid, uint32_t tid) -> std::optional<Asleep> {
    EXPECT_EQ(pid, kTarget);
    asked.push_back(tid);
    // Its user stack walked (a frame a signal interrupted, then one whose callers are unknown).
    return Asleep{.prev_state = kSleeping,
                  .kernel_frames = {"no_such_function+0x10/0x20"},
                  .user_frames = {0x401000, 0x402000},
                  .exact_user_frames = {1},
                  .user_stack_stopped = true};
  };
  std::vector<RingBatch> batches(1);
  batches[0].records = {Switch(t0, 0, kOther, kOther, kTarget, kTarget, 0)};
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  EXPECT_EQ(asked, std::vector<uint32_t>{kTarget + 1});
  std::vector<format::Record> waits;
  for (const format::Record& record : records) {
    if (std::holds_alternative<format::OffCpu>(record.payload)) waits.push_back(record);
  }
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].tid, kTarget + 1);
  const auto& off = std::get<format::OffCpu>(waits[0].payload);
  EXPECT_EQ(off.prev_state, kSleeping);
  EXPECT_EQ(waits[0].time_ns - off.duration_ns, t0) << "from the trace's first event";
  EXPECT_TRUE(off.kernel_stack.empty()) << "a function kallsyms does not have is left out";
  ASSERT_EQ(off_cpu_user_stacks_.size(), 1u);
  EXPECT_EQ(off_cpu_user_stacks_[0],
            (std::vector<uint64_t>{0x401000, 0x402000, format::kUnwindStoppedFrame}));
}

// A live session knows when recording began: the trace opens there with a
// clock_sync record and closes with one where tracing stopped, so a wait
// all along starts at the start, not at the first event seen.
TEST_F(PipelineReplayTest, ATraceOpensWhenRecordingBeganAndClosesWhenItStopped) {
  const uint64_t t0 = 2'000'000'000;
  recording_since_ns_ = t0 - 5'000'000;
  read_asleep_ = [](uint32_t, uint32_t tid) -> std::optional<Asleep> {
    if (tid == kTarget) return std::nullopt;  // it runs
    return Asleep{.prev_state = kSleeping};
  };
  std::vector<RingBatch> batches(1);
  batches[0].records = {Switch(t0, 0, kOther, kOther, kTarget, kTarget, 0)};
  const uint64_t final_drain = t0 + 100'000'000;
  const std::vector<format::Record> records = Replay(std::move(batches), t0, 100'000'000);
  ASSERT_GE(records.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<format::ClockSync>(records.front().payload));
  EXPECT_EQ(records.front().time_ns, recording_since_ns_);
  ASSERT_TRUE(std::holds_alternative<format::ClockSync>(records.back().payload));
  EXPECT_EQ(records.back().time_ns, final_drain);
  // Wall-clock time at that moment, as the clocks stand now.
  timespec realtime{}, monotonic{};
  clock_gettime(CLOCK_REALTIME, &realtime);
  clock_gettime(CLOCK_MONOTONIC, &monotonic);
  const double offset = (static_cast<double>(realtime.tv_sec) - monotonic.tv_sec) * 1e9 +
                        static_cast<double>(realtime.tv_nsec - monotonic.tv_nsec);
  const auto& opening = std::get<format::ClockSync>(records.front().payload);
  EXPECT_NEAR(static_cast<double>(opening.realtime_ns) - static_cast<double>(recording_since_ns_),
              offset, 1e9);
  const std::vector<format::OffCpu> waits = OfKind<format::OffCpu>(records);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].duration_ns, final_drain - recording_since_ns_);
}

// A thread asleep when recording began is read right then, and the wait its
// first switch-in ends has the stacks read: its switch-out, which would
// say, came before the trace.
TEST_F(PipelineReplayTest, AThreadAsleepAtTheStartHasTheStacksReadThenWhenItWakes) {
  const uint64_t t0 = 2'000'000'000;
  recording_since_ns_ = t0 - 5'000'000;
  std::vector<uint32_t> asked;
  read_asleep_ = [&](uint32_t, uint32_t tid) -> std::optional<Asleep> {
    asked.push_back(tid);
    if (tid == kTarget) return std::nullopt;  // it runs
    return Asleep{.prev_state = kSleeping,
                  .user_frames = {0x401000, 0x402000},
                  .read_ns = t0 - 4'000'000};
  };
  std::vector<RingBatch> batches(1);
  batches[0].records = {Switch(t0 - 1'000'000, 0, kOther, kOther, kTarget, kTarget, 0),
                        Wakeup(t0, 0, kTarget, kTarget + 1),
                        Switch(t0 + 1'000'000, 1, kOther, kOther, kTarget + 1, kTarget, 0)};
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  ASSERT_GE(asked.size(), 2u);
  EXPECT_EQ(std::set<uint32_t>(asked.begin(), asked.begin() + 2),
            (std::set<uint32_t>{kTarget, kTarget + 1}))
      << "each thread, when recording began";
  std::vector<format::Record> waits;
  for (const format::Record& record : records) {
    if (std::holds_alternative<format::OffCpu>(record.payload)) waits.push_back(record);
  }
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].tid, kTarget + 1);
  EXPECT_EQ(waits[0].time_ns, t0 + 1'000'000);
  const auto& off = std::get<format::OffCpu>(waits[0].payload);
  EXPECT_EQ(off.duration_ns, 6'000'000u) << "from the start";
  EXPECT_EQ(off.runq_ns, 1'000'000u);
  EXPECT_EQ(off.prev_state, kSleeping);
  ASSERT_EQ(off_cpu_user_stacks_.size(), 1u);
  EXPECT_EQ(off_cpu_user_stacks_[0], (std::vector<uint64_t>{0x401000, 0x402000}));
}

// The read when recording began stops at its budget (the ring is not
// drained meanwhile): a thread left unread and asleep all along is read
// when tracing stops.
TEST_F(PipelineReplayTest, ThreadsTheStartHadNoTimeToReadAreReadWhenTracingStops) {
  const uint64_t t0 = 2'000'000'000;
  recording_since_ns_ = t0 - 5'000'000;
  asleep_read_budget_ns_ = 1;  // over after the first thread
  std::vector<uint32_t> asked;
  read_asleep_ = [&](uint32_t, uint32_t tid) -> std::optional<Asleep> {
    asked.push_back(tid);
    usleep(1000);
    return Asleep{.prev_state = kSleeping, .read_ns = t0 - 4'000'000};
  };
  const std::vector<format::Record> records = Replay({}, t0);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_NE(asked[0], asked[1]) << "the one not read at the start, at the stop";
  std::set<uint32_t> waiting;
  for (const format::Record& record : records) {
    if (const auto* off = std::get_if<format::OffCpu>(&record.payload)) {
      waiting.insert(record.tid);
      EXPECT_EQ(off->duration_ns, record.time_ns - recording_since_ns_);
    }
  }
  EXPECT_EQ(waiting, (std::set<uint32_t>{kTarget, kTarget + 1}));
}

// The kernel reported neither the wakeup nor (on these guests, from its
// agent's thread) the switch-in: the wait's time queued comes from the run
// delay its next switch-out carries, and the wakeup is placed that long
// before the switch-in, as one the kernel did not report.
TEST_F(PipelineReplayTest, AWakeupTheKernelDidNotReportIsPlacedFromTheRunDelay) {
  const uint64_t t0 = 2'000'000'000;
  constexpr uint32_t kAgent = 81;
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Switch(t0, 1, kTarget + 1, kTarget, kAgent, kOther, kSleeping, 0, 50'000),
      // Its next switch-out: it ran 3 ms, and was queued 2 ms more than before.
      Switch(t0 + 12'000'000, 1, kTarget + 1, kTarget, kOther, kOther, kSleeping, 0, 2'050'000)};
  loupe_sched_switch& second = *reinterpret_cast<loupe_sched_switch*>(batches[0].records[1].data());
  second.prev_ran_ns = 3'000'000;
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  std::vector<format::Record> wakeups, waits;
  for (const format::Record& record : records) {
    if (std::holds_alternative<format::SchedWakeup>(record.payload)) wakeups.push_back(record);
    if (std::holds_alternative<format::OffCpu>(record.payload)) waits.push_back(record);
  }
  ASSERT_EQ(wakeups.size(), 1u);
  EXPECT_EQ(wakeups[0].time_ns, t0 + 7'000'000);
  const auto& wakeup = std::get<format::SchedWakeup>(wakeups[0].payload);
  EXPECT_EQ(wakeup.woken_tid, kTarget + 1);
  EXPECT_EQ(wakeup.context, format::WakerContext::kUnreported);
  ASSERT_GE(waits.size(), 1u);
  EXPECT_EQ(waits[0].tid, kTarget + 1);
  EXPECT_EQ(waits[0].time_ns, t0 + 9'000'000) << "at the switch-in placed";
  const auto& off = std::get<format::OffCpu>(waits[0].payload);
  EXPECT_EQ(off.duration_ns, 9'000'000u);
  EXPECT_EQ(off.runq_ns, 2'000'000u);
}

// A followed child is a target from its fork on, though Targets learns of
// it only when the fork leaves the reorder window: its first switch-in, one
// the kernel did not report, is placed from its switch-out's account.
TEST_F(PipelineReplayTest, AFollowedChildsMissingFirstSwitchInIsPlaced) {
  follow_children_ = true;
  const uint64_t t0 = 2'000'000'000;
  constexpr uint32_t kChild = 4'000'000;  // no such process: described from its parent
  loupe_process_fork fork{};
  fork.parent_tid = fork.parent_tgid = kTarget;
  fork.child_tid = fork.child_tgid = kChild;
  loupe_sched_wakeup born{};
  born.woken_tid = born.woken_tgid = kChild;
  born.waker_tid = born.waker_tgid = kTarget;
  born.target_cpu = 1;
  born.is_new = 1;
  loupe_sched_switch out{};
  out.prev_tid = out.prev_tgid = kChild;
  out.next_tid = out.next_tgid = kOther;
  out.prev_state = kSleeping;
  out.prev_ran_ns = 3'000;  // it ran from t0 + 6 µs: the CPU handed over unreported
  std::strncpy(out.next_comm, "other", sizeof out.next_comm);
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Bytes(fork, LOUPE_REC_PROCESS_FORK, t0 + 1'000, 0),
      Bytes(born, LOUPE_REC_SCHED_WAKEUP, t0 + 1'500, 0),
      Switch(t0 + 2'000, 1, kTarget + 1, kTarget, kOther, kOther, kSleeping),
      Bytes(out, LOUPE_REC_SCHED_SWITCH, t0 + 9'000, 1, offsetof(loupe_sched_switch, frames)),
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  bool placed = false;
  for (const format::Record& record : records) {
    const auto* change = std::get_if<format::SchedSwitch>(&record.payload);
    if (change != nullptr && change->next_tid == kChild) {
      EXPECT_EQ(record.time_ns, t0 + 6'000);
      EXPECT_NE(change->prev_state & format::kSwitchInferred, 0u);
      placed = true;
    }
  }
  EXPECT_TRUE(placed) << "the child's switch-in was not placed";
}

// The child, preempted, ran again unreported and exited: its last switch,
// after its exit, still places that switch-in (before the exit).
TEST_F(PipelineReplayTest, AFollowedChildsLastSwitchStillPlacesItsSwitchIn) {
  follow_children_ = true;
  const uint64_t t0 = 2'000'000'000;
  constexpr uint32_t kChild = 4'000'000;
  loupe_process_fork fork{};
  fork.parent_tid = fork.parent_tgid = kTarget;
  fork.child_tid = fork.child_tgid = kChild;
  loupe_thread_exit exit{};
  exit.tid = exit.tgid = kChild;
  exit.group_dead = 1;
  loupe_sched_switch last{};
  last.prev_tid = last.prev_tgid = kChild;
  last.next_tid = last.next_tgid = kOther;
  last.prev_state = format::kTaskDead;
  last.prev_ran_ns = 1'000;  // on a CPU since t0 + 4.1 µs
  std::strncpy(last.next_comm, "other", sizeof last.next_comm);
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Bytes(fork, LOUPE_REC_PROCESS_FORK, t0 + 1'000, 0),
      Switch(t0 + 1'500, 0, kOther, kOther, kChild, kChild, 0),
      Switch(t0 + 2'000, 0, kChild, kChild, kOther, kOther, 0),  // preempted
      Bytes(exit, LOUPE_REC_THREAD_EXIT, t0 + 5'000, 0),
      Bytes(last, LOUPE_REC_SCHED_SWITCH, t0 + 5'100, 0, offsetof(loupe_sched_switch, frames)),
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  std::vector<uint64_t> inferred;
  for (const format::Record& record : records) {
    const auto* change = std::get_if<format::SchedSwitch>(&record.payload);
    if (change != nullptr && (change->prev_state & format::kSwitchInferred) != 0) {
      inferred.push_back(record.time_ns);
    }
  }
  EXPECT_EQ(inferred, std::vector<uint64_t>{t0 + 4'100});
}

// A target preempted, switched in unreported, then exec'ing a program that
// drops it (setuid, for a caller that is not root): no switch-out of it is
// recorded after, so only the exec can end its wait, not the trace's end.
TEST_F(PipelineReplayTest, AnExecEndsTheWaitOfAThreadSwitchedInUnreported) {
  const uint64_t t0 = 2'000'000'000;
  loupe_process_exec exec{};
  exec.tid = exec.tgid = exec.old_tid = kTarget;
  exec.ran_ns = 3'000;  // on a CPU since t0 + 7 µs
  std::strncpy(exec.filename, "/usr/bin/passwd", sizeof exec.filename);
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Switch(t0 + 1'000, 0, kOther, kOther, kTarget, kTarget, 0),
      Switch(t0 + 2'000, 0, kTarget, kTarget, kOther, kOther, 0),  // preempted
      Bytes(exec, LOUPE_REC_PROCESS_EXEC, t0 + 10'000, 0),
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  const std::vector<format::OffCpu> waits = OfKind<format::OffCpu>(records);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].duration_ns, 5'000u);
  EXPECT_EQ(waits[0].runq_ns, 5'000u);
}

// A wait ended by a record of the thread's own (its switch-in unreported,
// never placed: no switch-out follows) belongs to the operation that
// record ends, and not to one it begins.
TEST_F(PipelineReplayTest, AWaitEndedByTheThreadsOwnRecordKeepsItsOperation) {
  const uint64_t t0 = 2'000'000'000;
  const auto shim = [](uint64_t operation_id) {
    loupe_shim_event event{};
    event.tid = event.tgid = kTarget;
    event.args[0] = operation_id;
    return event;
  };
  std::vector<RingBatch> batches(1);
  batches[0].records = {
      Switch(t0 + 1'000, 0, kOther, kOther, kTarget, kTarget, 0),
      Bytes(shim(7), LOUPE_REC_OPERATION_BEGIN, t0 + 1'500, 0),
      Switch(t0 + 2'000, 0, kTarget, kTarget, kOther, kOther, 0),  // preempted
      Bytes(shim(7), LOUPE_REC_OPERATION_END, t0 + 6'000, 1),      // ran again, unreported
      Switch(t0 + 7'000, 1, kTarget, kTarget, kOther, kOther, 0),  // preempted again
      Bytes(shim(8), LOUPE_REC_OPERATION_BEGIN, t0 + 9'000, 0),    // unreported again
      Bytes(shim(8), LOUPE_REC_OPERATION_END, t0 + 9'500, 0),
  };
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  std::vector<std::pair<uint64_t, uint64_t>> waits;  // end, operation
  for (const format::Record& record : records) {
    if (const auto* off = std::get_if<format::OffCpu>(&record.payload)) {
      EXPECT_EQ(off->duration_ns, off->runq_ns);
      waits.emplace_back(record.time_ns - t0, off->operation_id);
    }
  }
  EXPECT_EQ(waits, (std::vector<std::pair<uint64_t, uint64_t>>{{6'000, 7}, {9'000, 0}}));
}

TEST_F(PipelineReplayTest, EveryLossIsInTheTraceAndInTheStatsExactly) {
  const uint64_t t0 = 3'000'000'000;
  std::vector<RingBatch> batches(3);
  batches[0].records = {Switch(t0, 0, kTarget, kTarget, kOther, kOther, 0)};
  batches[0].counters[LOUPE_CNT_RING_FULL_SCHED] = 7;
  // A record of a type nobody knows: a bug on one side of records.h.
  std::vector<uint8_t> unknown = Wakeup(t0 + 10, 0, 1, kTarget);
  unknown[0] = 0xee;
  batches[1].records = {unknown};
  batches[1].counters[LOUPE_CNT_RING_FULL_SCHED] = 7;
  batches[1].counters[LOUPE_CNT_STACK_TRUNCATED_CPU] = 2;
  batches[2].records = {};
  batches[2].counters[LOUPE_CNT_RING_FULL_SCHED] = 12;
  batches[2].counters[LOUPE_CNT_STACK_TRUNCATED_CPU] = 2;
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  std::map<std::string, uint64_t> in_trace;
  for (const format::Loss& loss : OfKind<format::Loss>(records)) {
    in_trace[fmt::format("{}/{}", format::LossSourceName(loss.source),
                         format::LossReasonName(loss.reason))] += loss.count;
  }
  const std::map<std::string, uint64_t> expected = {
      {"sched/ring_full", 12}, {"cpu_sample/stack_truncated", 2}, {"merge/malformed", 1}};
  EXPECT_EQ(in_trace, expected);
  EXPECT_EQ(pipeline_->stats().losses, expected);
  // The stats count what the files hold, the preamble and Loss records too.
  uint64_t in_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    auto reader = format::SegmentReader::Open(entry.path().string());
    ASSERT_TRUE(reader.ok()) << reader.status();
    format::Record record;
    while ((*reader)->Next(&record)) ++in_files;
  }
  EXPECT_GT(in_files, records.size());
  EXPECT_EQ(pipeline_->stats().events, in_files);
}

// A ring that stays full loses events at every drain: the log gets a line
// a second at most, and the lines still add up to every event lost.
TEST_F(PipelineReplayTest, LossWarningsComeOnceASecondAndAddUp) {
  std::ostringstream logged;
  log_ = std::make_shared<spdlog::logger>(
      "replay", std::make_shared<spdlog::sinks::ostream_sink_mt>(logged));
  log_->set_pattern("%v");
  const uint64_t t0 = 5'000'000'000;
  std::vector<RingBatch> batches(25);  // 2.5 s of drains, 100 ms apart
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i].counters[LOUPE_CNT_RING_FULL_SHIM] = 10 * (i + 1);
  }
  Replay(std::move(batches), t0);
  std::istringstream lines(logged.str());
  uint64_t warned = 0, warnings = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(": lost ");
    if (at == std::string::npos) continue;
    ++warnings;
    warned += std::stoull(line.substr(at + 7));
    EXPECT_NE(line.find("shim/ring_full"), std::string::npos) << line;
  }
  EXPECT_EQ(warned, 250u) << logged.str();
  EXPECT_GE(warnings, 2u);
  EXPECT_LE(warnings, 4u) << logged.str();
}

TEST_F(PipelineReplayTest, ATargetsExitEmptiesTheTargets) {
  const uint64_t t0 = 4'000'000'000;
  std::vector<RingBatch> batches(1);
  batches[0].records = {GroupExit(t0)};
  const std::vector<format::Record> records = Replay(std::move(batches), t0 + 100'000'000);
  EXPECT_EQ(OfKind<format::ThreadExit>(records).size(), 1u);
  EXPECT_TRUE(pipeline_->targets().empty());
}

// After its process exited, a target thread's last switch (BPF names it
// then, as it does an untraced thread) is still the target's: not
// described as a foreign process's thread. The untraced side is.
TEST_F(PipelineReplayTest, AnExitedTargetsLastSwitchIsNotAForeignThreads) {
  const uint64_t t0 = 4'000'000'000;
  std::vector<uint8_t> last_switch = Switch(t0 + 1'000, 0, kTarget + 1, kTarget, kOther, kOther, 0);
  std::strncpy(reinterpret_cast<char*>(last_switch.data() + offsetof(loupe_sched_switch, prev_comm)),
               "worker", LOUPE_COMM_LEN);
  std::vector<RingBatch> batches(1);
  batches[0].records = {GroupExit(t0), last_switch};
  Replay(std::move(batches), t0 + 100'000'000);

  std::set<uint32_t> described_foreign;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    auto reader = format::SegmentReader::Open(entry.path().string());
    ASSERT_TRUE(reader.ok()) << reader.status();
    format::Record record;
    while ((*reader)->Next(&record)) {
      const auto* thread = std::get_if<format::ThreadInfo>(&record.payload);
      if (thread != nullptr && thread->foreign) described_foreign.insert(record.tid);
    }
  }
  EXPECT_EQ(described_foreign, std::set<uint32_t>{kOther});
}

TEST(RingCaptureTest, ACaptureReadsBackAsItWasDrained) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/ring.capture";
  absl::StatusOr<std::unique_ptr<RingCaptureWriter>> writer = RingCaptureWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::vector<uint8_t> first = Wakeup(10, 0, 1, kTarget);
  const std::vector<uint8_t> second = GroupExit(20);
  bpf::BpfCounters counters{};
  (*writer)->Record(first);
  counters[LOUPE_CNT_RING_FULL_CPU] = 3;
  ASSERT_TRUE((*writer)->EndBatch(counters).ok());
  (*writer)->Record(second);
  ASSERT_TRUE((*writer)->EndBatch(counters).ok());
  writer->reset();

  absl::StatusOr<std::vector<RingBatch>> batches = ReadRingCapture(path);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].records, std::vector<std::vector<uint8_t>>{first});
  EXPECT_EQ((*batches)[0].counters[LOUPE_CNT_RING_FULL_CPU], 3u);
  EXPECT_EQ((*batches)[1].records, std::vector<std::vector<uint8_t>>{second});
}

TEST(RingCaptureTest, ACutCaptureIsAnErrorNamingWhere) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/ring.capture";
  {
    absl::StatusOr<std::unique_ptr<RingCaptureWriter>> writer = RingCaptureWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->Record(Wakeup(10, 0, 1, kTarget));
    ASSERT_TRUE((*writer)->EndBatch({}).ok());
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  absl::StatusOr<std::vector<RingBatch>> batches = ReadRingCapture(path);
  ASSERT_FALSE(batches.ok());
  EXPECT_NE(batches.status().message().find("cut at byte"), std::string::npos)
      << batches.status();

  const std::string not_capture = dir.path() + "/other";
  std::ofstream(not_capture) << "hello";
  EXPECT_NE(ReadRingCapture(not_capture).status().message().find("bad magic"), std::string::npos);

  // A capture of an older record layout is refused, not misread.
  const std::string older = dir.path() + "/older";
  std::ofstream(older) << "LOUPRNG1";
  EXPECT_NE(ReadRingCapture(older).status().message().find("version 1, this build reads version 2"),
            std::string::npos)
      << ReadRingCapture(older).status();
}

}  // namespace
}  // namespace loupe::session
