// The Perfetto export on hand-built traces, read back against Perfetto's
// official schema with the sequence's interning replayed: a handler blocked
// on a lock shows a "lock" slice with its stack and its waker; switches and
// wakeups are Perfetto's own per-CPU scheduling data, with thread names, from
// which it draws runnable time and wakers; and requests share a bounded set
// of lanes.
#include "analysis/perfetto_writer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "perfetto_decoder.h"

namespace loupe::analysis {
namespace {

using format::Record;
using testing::DecodedEvent;
using testing::DecodedTrace;
using testing::DecodedTrack;

constexpr uint32_t kPid = 10, kHandler = 11, kWaker = 12, kNoisyPid = 98, kHog = 99;
constexpr uint64_t kFutexFrame = 0xffffffff81000010, kMutexLock = 0x7f0000001000,
                   kLookup = 0x401000;
const uint64_t kBlockedUser[] = {kMutexLock, kLookup};
const uint64_t kBlockedKernel[] = {kFutexFrame};

// Mapping 1 is libc (a system library), 2 the application; 0 the kernel.
v1::SymbolTable Symbols() {
  v1::SymbolTable table;
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/srv/lock_service"}) {
    auto* mapping = table.add_mappings();
    mapping->set_pid(kPid);
    mapping->set_path(path);
  }
  const struct {
    uint64_t address;
    uint32_t mapping;
    const char* function;
  } names[] = {{kFutexFrame, 0, "futex_wait_queue"},
               {kMutexLock, 1, "pthread_mutex_lock"},
               {kLookup, 2, "lookup_shared_cache"}};
  for (const auto& name : names) {
    auto* entry = table.add_addresses();
    entry->set_pid(name.mapping == 0 ? 0 : kPid);
    entry->set_address(name.address);
    entry->set_mapping(name.mapping);
    entry->add_frames()->set_function(name.function);
  }
  return table;
}

// The export of `records`, decoded as Perfetto would.
DecodedTrace Export(const std::vector<Record>& records) {
  StackProfile stacks;
  stacks.AddSymbols(Symbols());
  std::ostringstream out;
  PerfettoWriter writer(out, PerfettoCompression::kDeflate, stacks);
  writer.Start(1, 2);
  for (const Record& record : records) writer.Add(record);
  writer.Finish();
  DecodedTrace trace = testing::DecodePerfetto(out.str());
  EXPECT_EQ(trace.problems, std::vector<std::string>{});
  return trace;
}

const DecodedEvent* Named(const DecodedTrace& trace, std::string_view name) {
  for (const DecodedEvent& event : trace.events) {
    if (event.name == name) return &event;
  }
  return nullptr;
}

// The handler takes a lock the waker holds: blocked 3 µs → 50 µs, then
// runnable for 4 ms while bg_compress, of another process, has its CPU.
std::vector<Record> LockWait() {
  return {
      {.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "lock_service"}},
      {.time_ns = 1'000,
       .tid = kHandler,
       .payload = format::ThreadInfo{.pid = kPid, .name = "worker-0"}},
      {.time_ns = 1'000,
       .tid = kWaker,
       .payload = format::ThreadInfo{.pid = kPid, .name = "janitor"}},
      {.time_ns = 1'000,
       .tid = kHog,
       .payload =
           format::ThreadInfo{
               .pid = kNoisyPid, .name = "bg_compress", .foreign = true, .process_name = "noisy"}},
      {.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}},
      {.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWaker, 0}},
      {.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{kHog, 1}},
      {.time_ns = 50'000,
       .tid = kWaker,
       .cpu = 1,
       .payload = format::SchedWakeup{.woken_tid = kHandler, .target_cpu = 0}},
      {.time_ns = 4'050'000, .tid = kHog, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}},
      {.time_ns = 4'050'000,
       .tid = kHandler,
       .cpu = 0,
       .payload = format::OffCpu{.duration_ns = 4'047'000,
                                 .runq_ns = 4'000'000,
                                 .prev_state = 1,
                                 .waker_tid = kWaker,
                                 .user_stack = kBlockedUser,
                                 .kernel_stack = kBlockedKernel}},
      {.time_ns = 4'100'000, .tid = kHandler, .payload = format::Instant{.name = "done"}},
  };
}

TEST(PerfettoWriterTest, BlockedSliceIsNamedByItsWaitWithStackAndWaker) {
  const DecodedTrace trace = Export(LockWait());
  const DecodedEvent* lock = Named(trace, "lock");
  ASSERT_NE(lock, nullptr);
  EXPECT_EQ(lock->type, "TYPE_SLICE_BEGIN");
  EXPECT_EQ(lock->time_ns, 3'000u);
  EXPECT_EQ(trace.tracks.at(lock->track).name, "scheduling");
  auto args = lock->args;
  EXPECT_EQ(args["function"], "lookup_shared_cache");
  EXPECT_EQ(args["stack"], "futex_wait_queue [kernel] < pthread_mutex_lock < lookup_shared_cache");
  EXPECT_EQ(args["waker"], "janitor (tid 12, lock_service)");
  EXPECT_EQ(args["waker_tid"], std::to_string(kWaker));
  // It ends at the wakeup, on its own track's sequence (blocked slices are
  // written when they end, so the sequence's clock must go back for them).
  const DecodedEvent* end = nullptr;
  for (const DecodedEvent& event : trace.events) {
    if (event.track == lock->track && event.type == "TYPE_SLICE_END") end = &event;
  }
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->time_ns, 50'000u);
}

// Events lost and content cut are told apart, as verify tells them.
TEST(PerfettoWriterTest, LossesAreLostAndCutsAreCut) {
  std::vector<Record> records = LockWait();
  records.push_back({.time_ns = 4'200'000,
                     .payload = format::Loss{.source = format::LossSource::kSched,
                                             .reason = format::LossReason::kRingFull,
                                             .count = 3}});
  records.push_back({.time_ns = 4'300'000,
                     .payload = format::Loss{.source = format::LossSource::kSched,
                                             .reason = format::LossReason::kUnwindStopped,
                                             .count = 2}});
  const DecodedTrace trace = Export(records);
  EXPECT_NE(Named(trace, "lost 3 sched (ring_full)"), nullptr);
  EXPECT_NE(Named(trace, "cut 2 sched (unwind_stopped)"), nullptr);
}

TEST(PerfettoWriterTest, SwitchesAndWakeupsArePerfettosSchedulingData) {
  const DecodedTrace trace = Export(LockWait());
  ASSERT_EQ(trace.switches.size(), 4u);
  // Per CPU, in time order: cpu 0's three switches, then cpu 1's one.
  const testing::DecodedSwitch& out = trace.switches[1];
  EXPECT_EQ(out.cpu, 0u);
  EXPECT_EQ(out.time_ns, 3'000u);
  EXPECT_EQ(out.prev_state, 1);
  EXPECT_EQ(out.next_tid, kHog);
  EXPECT_EQ(out.next_comm, "bg_compress");
  const testing::DecodedSwitch& back = trace.switches[2];
  EXPECT_EQ(back.time_ns, 4'050'000u);
  EXPECT_EQ(back.next_tid, kHandler);
  EXPECT_EQ(back.next_comm, "worker-0");
  EXPECT_EQ(trace.switches[3].cpu, 1u);
  EXPECT_EQ(trace.switches[3].next_comm, "janitor");
  ASSERT_EQ(trace.wakings.size(), 1u);
  const testing::DecodedWaking& waking = trace.wakings[0];
  EXPECT_EQ(waking.cpu, 1u);  // the waker's: Perfetto takes the waker from what runs there
  EXPECT_EQ(waking.time_ns, 50'000u);
  EXPECT_EQ(waking.tid, kHandler);
  EXPECT_EQ(waking.target_cpu, 0u);
  EXPECT_EQ(waking.comm, "worker-0");
  // Runnable time and wakeups are Perfetto's to draw from these, not slices.
  EXPECT_EQ(Named(trace, "runnable"), nullptr);
  EXPECT_EQ(Named(trace, "wakeup"), nullptr);
}

// Loupe's marks on a switch (throttled, inferred) are not task states:
// Perfetto gets the kernel's state, and a throttled wait is a slice of its own.
TEST(PerfettoWriterTest, AThrottledWaitIsASliceAndItsSwitchARunnableOne) {
  std::vector<Record> records = LockWait();
  records.resize(records.size() - 1);  // through the handler's switch back in at 4.05 ms
  records.push_back({.time_ns = 4'200'000, .tid = kHandler, .cpu = 0,
                     .payload = format::SchedSwitch{0, format::kSwitchThrottled}});
  records.push_back({.time_ns = 4'900'000, .tid = 0, .cpu = 0,
                     .payload = format::SchedSwitch{kHandler, format::kSwitchInferred}});
  records.push_back({.time_ns = 5'000'000, .tid = kHandler, .payload = format::Instant{.name = "done"}});
  const DecodedTrace trace = Export(records);
  ASSERT_EQ(trace.switches.size(), 6u);
  EXPECT_EQ(trace.switches[3].time_ns, 4'200'000u);
  EXPECT_EQ(trace.switches[3].prev_state, 0) << "preempted, as the kernel said";
  EXPECT_EQ(trace.switches[4].prev_state, 0);
  const DecodedEvent* throttled = Named(trace, "throttled");
  ASSERT_NE(throttled, nullptr);
  EXPECT_EQ(throttled->time_ns, 4'200'000u);
  EXPECT_EQ(trace.tracks.at(throttled->track).name, "scheduling");
  EXPECT_EQ(throttled->args.at("why"), "its cgroup's CPU quota was spent");
}

// `count` requests, one begun every 100 ns, each lasting `length` ns (an
// end at the same time as a begin comes first).
std::vector<Record> Requests(int count, uint64_t length) {
  std::vector<std::pair<uint64_t, Record>> timed;
  for (int i = 0; i < count; ++i) {
    const uint64_t begin = 1'000 + 100 * static_cast<uint64_t>(i), id = 100 + i;
    timed.push_back(
        {2 * begin + 1,
         {.time_ns = begin, .tid = kHandler, .payload = format::OperationBegin{id, "get"}}});
    timed.push_back(
        {2 * (begin + length),
         {.time_ns = begin + length, .tid = kHandler, .payload = format::OperationEnd{id}}});
  }
  std::sort(timed.begin(), timed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Record> records = {{.time_ns = 1'000,
                                  .tid = kHandler,
                                  .payload = format::ThreadInfo{.pid = kPid, .name = "worker-0"}}};
  for (auto& [order, record] : timed) records.push_back(std::move(record));
  return records;
}

std::set<std::string> LanesUsed(const DecodedTrace& trace) {
  std::set<std::string> lanes;
  for (const DecodedEvent& event : trace.events) {
    if (event.type != "TYPE_SLICE_BEGIN" || event.name != "get") continue;
    const DecodedTrack& lane = trace.tracks.at(event.track);
    EXPECT_EQ(trace.tracks.at(lane.parent).name, "requests");
    lanes.insert(lane.name);
  }
  return lanes;
}

TEST(PerfettoWriterTest, RequestsShareTheFewestLanes) {
  const DecodedTrace trace = Export(Requests(40, 1'000));  // 10 open at a time
  const std::set<std::string> lanes = LanesUsed(trace);
  EXPECT_EQ(lanes.size(), 10u);
  EXPECT_TRUE(lanes.contains("requests 1"));
  EXPECT_TRUE(lanes.contains("requests 10"));
}

TEST(PerfettoWriterTest, RequestsBeyondTheLastLaneAreCounted) {
  const DecodedTrace trace = Export(Requests(40, 100'000));  // all 40 open at once
  EXPECT_EQ(LanesUsed(trace).size(), PerfettoWriter::kMaxLanes);
  const DecodedEvent* missing = Named(trace, "8 requests not drawn: every lane busy");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(trace.tracks.at(missing->track).name, "requests");
}

// Passed from the acceptor to a worker: one slice on one lane from the
// first begin to the last end, with the pass and the take-up marked on it.
TEST(PerfettoWriterTest, AnOperationPassedBetweenThreadsIsOneSlice) {
  constexpr uint32_t kWorker = kHandler + 1;
  std::vector<Record> records = {
      {.time_ns = 1'000, .tid = kHandler, .payload = format::ThreadInfo{.pid = kPid, .name = "acceptor"}},
      {.time_ns = 1'000, .tid = kWorker, .payload = format::ThreadInfo{.pid = kPid, .name = "worker"}},
      {.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{7, "get"}},
      {.time_ns = 3'000, .tid = kHandler, .payload = format::OperationEnd{.operation_id = 7, .passed = true}},
      {.time_ns = 9'000, .tid = kWorker, .payload = format::OperationBegin{7, "get"}},
      {.time_ns = 12'000, .tid = kWorker, .payload = format::OperationEnd{7}}};
  const DecodedTrace trace = Export(records);
  std::vector<std::pair<std::string, uint64_t>> on_lane;
  for (const DecodedEvent& event : trace.events) {
    if (!trace.tracks.at(event.track).name.starts_with("requests ")) continue;
    on_lane.emplace_back(event.type == "TYPE_SLICE_END" ? "end" : event.name, event.time_ns);
  }
  const std::vector<std::pair<std::string, uint64_t>> expected = {
      {"get", 2'000}, {"passed on", 3'000}, {"taken up", 9'000}, {"end", 12'000}};
  EXPECT_EQ(on_lane, expected);
  const DecodedEvent* taken = Named(trace, "taken up");
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->args.at("tid"), std::to_string(kWorker));
}

// A uprobe call is written at its return, so an outer call begins before
// the inner one written earlier on the same track: its begin is stamped on
// one of the sequence's late clocks, and both calls keep their times.
TEST(PerfettoWriterTest, NestedUprobeCallsKeepTheirTimes) {
  std::vector<Record> records = LockWait();
  records.push_back({.time_ns = 5'000'000,
                     .tid = kHandler,
                     .payload = format::UprobeReturn{.probe = "inner", .duration_ns = 300'000}});
  records.push_back({.time_ns = 6'000'000,
                     .tid = kHandler,
                     .payload = format::UprobeReturn{.probe = "outer", .duration_ns = 1'800'000}});
  const DecodedTrace trace = Export(records);
  std::map<std::string, std::pair<uint64_t, uint64_t>> calls;  // name -> (begin, end)
  std::vector<std::string> open;
  for (const DecodedEvent& event : trace.events) {
    if (trace.tracks.at(event.track).name != "uprobes") continue;
    if (event.type == "TYPE_SLICE_BEGIN") {
      calls[event.name].first = event.time_ns;
      open.push_back(event.name);
    } else if (event.type == "TYPE_SLICE_END") {
      ASSERT_FALSE(open.empty());
      calls[open.back()].second = event.time_ns;
      open.pop_back();
    }
  }
  EXPECT_EQ(calls["inner"], std::make_pair(uint64_t{4'700'000}, uint64_t{5'000'000}));
  EXPECT_EQ(calls["outer"], std::make_pair(uint64_t{4'200'000}, uint64_t{6'000'000}));
}

// The blocked handler's stack, sampled: the frames read back outermost
// first, user frames in their files, the kernel's in "/kernel".
TEST(PerfettoWriterTest, SampleStacksReadBackWithFunctionsAndMappings) {
  std::vector<Record> records = LockWait();
  for (uint64_t time : {4'200'000, 4'300'000}) {  // twice: the second refers to the first's ids
    records.push_back({.time_ns = time,
                       .tid = kHandler,
                       .cpu = 1,
                       .payload = format::CpuSample{kBlockedUser, kBlockedKernel}});
  }
  const DecodedTrace trace = Export(records);
  ASSERT_EQ(trace.samples.size(), 2u);
  for (const testing::DecodedSample& sample : trace.samples) {
    EXPECT_EQ(sample.tid, kHandler);
    EXPECT_EQ(sample.pid, kPid);
    EXPECT_EQ(sample.cpu, 1u);
    EXPECT_EQ(sample.frames, (std::vector<std::string>{"lookup_shared_cache", "pthread_mutex_lock",
                                                        "futex_wait_queue"}));
    EXPECT_EQ(sample.mappings, (std::vector<std::string>{"/srv/lock_service",
                                                          "/usr/lib/x86_64-linux-gnu/libc.so.6",
                                                          "/kernel"}));
  }
  EXPECT_EQ(trace.samples[1].time_ns, 4'300'000u);
}

}  // namespace
}  // namespace loupe::analysis
