// The report's request model on hand-built traces: a request blocked on a
// lock that another thread holds, told by an operation and a span of the
// same extent; a request crossing into a new segment (its preamble repeats);
// a trace without scheduler records; unpaired begins and ends.
#include "analysis/report_model.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <tuple>

#include "analysis/report_output.h"

namespace loupe::analysis {
namespace {

using format::Record;

constexpr uint32_t kPid = 10, kHandler = 11, kHolder = 12;
constexpr uint64_t kFutexFrame = 0xffffffff81000010, kLockWait = 0x7f0000001000,
                   kCondWait = 0x7f0000002000, kLookup = 0x401000, kCompact = 0x402000;
const uint64_t kBlockedUser[] = {kLockWait, kLookup};
const uint64_t kBlockedKernel[] = {kFutexFrame};
const uint64_t kHolderUser[] = {kCompact};

v1::SymbolTable Symbols() {
  v1::SymbolTable table;
  auto* libc = table.add_mappings();
  libc->set_pid(kPid);
  libc->set_path("/usr/lib/x86_64-linux-gnu/libc.so.6");
  auto* app = table.add_mappings();
  app->set_pid(kPid);
  app->set_path("/srv/lock_service");
  auto name = [&](uint32_t pid, uint64_t address, uint32_t mapping, const char* function) {
    auto* entry = table.add_addresses();
    entry->set_pid(pid);
    entry->set_address(address);
    entry->set_mapping(mapping);
    entry->add_frames()->set_function(function);
  };
  name(0, kFutexFrame, 0, "futex_wait_queue");
  name(kPid, kLockWait, 1, "__lll_lock_wait");
  name(kPid, kCondWait, 1, "pthread_cond_wait");
  name(kPid, kLookup, 2, "lookup_shared_cache");
  name(kPid, kCompact, 2, "janitor_compact_locked");
  return table;
}

// Symbols() and kernel functions at the given addresses.
v1::SymbolTable SymbolsAndKernel(std::initializer_list<std::pair<uint64_t, const char*>> kernel) {
  v1::SymbolTable table = Symbols();
  for (const auto& [address, function] : kernel) {
    auto* entry = table.add_addresses();
    entry->set_address(address);
    entry->add_frames()->set_function(function);
  }
  return table;
}

// Code in anonymous memory with no perf map to name it (a JIT's) is named
// by its address, and says so: two such mappings' offsets do not merge.
TEST(StackProfileTest, AnonymousCodeIsNamedByItsAddress) {
  v1::SymbolTable table;
  for (uint64_t start : {0x7f0000100000ull, 0x7f0000200000ull}) {
    auto* heap = table.add_mappings();
    heap->set_pid(kPid);
    heap->set_start(start);
    heap->set_end(start + 0x10000);
  }
  for (uint32_t mapping : {1u, 2u}) {
    auto* entry = table.add_addresses();
    entry->set_pid(kPid);
    entry->set_address(0x7f0000000000ull + mapping * 0x100000 + 0xc4df);
    entry->set_mapping(mapping);
  }
  StackProfile stacks;
  stacks.AddSymbols(table);
  const std::vector<NamedFrame> first = stacks.Frames(kPid, 0x7f000010c4df, false);
  const std::vector<NamedFrame> second = stacks.Frames(kPid, 0x7f000020c4df, false);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].function, "[JIT/anonymous code] 0x7f000010c4df");
  EXPECT_NE(first[0].function, second[0].function);
  EXPECT_FALSE(first[0].system);
}

void Preamble(ReportModel& model, uint64_t t) {
  model.Add({.time_ns = t, .tid = kPid, .payload = format::ProcessInfo{.name = "lock_service"}});
  model.Add({.time_ns = t, .tid = kHandler, .payload = format::ThreadInfo{.pid = kPid, .name = "worker-0"}});
  model.Add({.time_ns = t, .tid = kHolder, .payload = format::ThreadInfo{.pid = kPid, .name = "janitor"}});
}

// The handler's request: runs 1 µs, blocks on the lock 47 µs until the
// janitor (sampled in janitor_compact_locked) lets go, waits 0.5 µs for
// its CPU, runs 0.6 µs more.
void LockWait(ReportModel& model, bool new_segment_midway) {
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kHolder, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{42, "request"}});
  model.Add({.time_ns = 2'100, .tid = kHandler,
             .payload = format::SpanBegin{.span_id = 1, .operation_id = 42, .name = "handle"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 5'000, .tid = kHolder, .cpu = 1,
             .payload = format::CpuSample{.user_stack = kHolderUser}});
  if (new_segment_midway) Preamble(model, 20'000);
  model.Add({.time_ns = 50'000, .tid = kHolder, .cpu = 1,
             .payload = format::SchedWakeup{.woken_tid = kHandler, .target_cpu = 0}});
  model.Add({.time_ns = 50'500, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 50'500, .tid = kHandler, .cpu = 0,
             .payload = format::OffCpu{.duration_ns = 47'500, .runq_ns = 500, .prev_state = 1,
                                       .waker_tid = kHolder, .user_stack = kBlockedUser,
                                       .kernel_stack = kBlockedKernel, .operation_id = 42}});
  model.Add({.time_ns = 51'000, .tid = kHandler, .payload = format::SpanEnd{1}});
  model.Add({.time_ns = 51'100, .tid = kHandler, .payload = format::OperationEnd{42}});
  model.AddSymbols(Symbols());
  model.Finish();
}

const KindReport* KindNamed(const ReportModel& model, std::string_view name) {
  for (const KindReport& kind : model.kinds()) {
    if (kind.kind.name == name) return &kind;
  }
  return nullptr;
}

// Operation 3, "request", begun on kHandler running on CPU 0 at 1 µs.
void BeginRequestOnCpu0(ReportModel& model) {
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::OperationBegin{3, "request"}});
}

// The model finished, its kind "request" if its slow requests were sampled.
const KindReport* FinishedWithSlowSamples(ReportModel& model) {
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  return request != nullptr && !request->slow.functions.empty() ? request : nullptr;
}

void ExpectPartsAddUp(const Breakdown& b) {
  uint64_t off = 0;
  for (const auto& [wait, ns] : b.off_cpu_ns) off += ns;
  EXPECT_EQ(b.on_cpu_ns + b.runq_ns + b.queued_ns + b.unaccounted_ns + off, b.duration_ns);
}

// A program names its threads and requests with any bytes: the JSON report
// keeps UTF-8 names and turns other bytes into U+FFFD instead of failing.
TEST(ReportModelTest, NamesThatAreNotUtfEightStillMakeAJsonReport) {
  ReportModel model({});
  model.Add({.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "svc\xff"}});
  model.Add({.time_ns = 1'000, .tid = kHandler,
             .payload = format::ThreadInfo{.pid = kPid, .name = "r\xc3\xa9seau\xfe"}});
  model.Add({.time_ns = 0, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{7, "req\xff"}});
  model.Add({.time_ns = 9'000, .tid = kHandler, .payload = format::OperationEnd{7}});
  model.Finish();

  const nlohmann::json report = nlohmann::json::parse(ReportJson(model, {}));
  EXPECT_EQ(report["request_kinds"][0]["name"], "req\xef\xbf\xbd");
  ASSERT_FALSE(report["threads"].empty());
  EXPECT_EQ(report["threads"][0]["name"], "r\xc3\xa9seau\xef\xbf\xbd");
  EXPECT_EQ(report["threads"][0]["process"], "svc\xef\xbf\xbd");
}

// A timer's wakeups are one waker, whichever task each one interrupted.
TEST(ReportModelTest, AnInterruptsWakeupsAreOneWakerWhateverTaskItInterrupted) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{5, "nap"}});
  uint64_t t = 2'000;
  for (const uint32_t interrupted : {kHolder, 0u + 77}) {
    model.Add({.time_ns = t + 1'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = t + 31'000, .tid = interrupted, .cpu = 0,
               .payload = format::SchedWakeup{.woken_tid = kHandler,
                                              .context = format::WakerContext::kTimer}});
    model.Add({.time_ns = t + 31'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
    t += 31'000;
  }
  model.Add({.time_ns = t + 1'000, .tid = kHandler, .payload = format::OperationEnd{5}});
  model.Finish();
  const KindReport* nap = KindNamed(model, "nap");
  ASSERT_NE(nap, nullptr);
  ASSERT_EQ(nap->slow.wakers.size(), 1u);
  EXPECT_EQ(nap->slow.wakers[0].context, "timer");
  EXPECT_EQ(nap->slow.wakers[0].ns, 60'000u);
}

// A waker that was itself off CPU while the woken thread waited (it slept
// before it signalled) is not said to be working anywhere.
TEST(ReportModelTest, AWakerThatWasOffCpuItselfIsSaidToBe) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kHolder, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{42, "request"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 3'500, .tid = kHolder, .cpu = 1, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 40'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kHolder, 0}});
  model.Add({.time_ns = 40'000, .tid = kHolder, .cpu = 1,
             .payload = format::OffCpu{.duration_ns = 36'500, .prev_state = 1,
                                       .user_stack = kHolderUser, .kernel_stack = kBlockedKernel}});
  model.Add({.time_ns = 41'000, .tid = kHolder, .cpu = 1,
             .payload = format::SchedWakeup{.woken_tid = kHandler, .target_cpu = 0}});
  model.Add({.time_ns = 41'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 41'000, .tid = kHandler, .cpu = 0,
             .payload = format::OffCpu{.duration_ns = 38'000, .prev_state = 1, .waker_tid = kHolder,
                                       .user_stack = kBlockedUser, .kernel_stack = kBlockedKernel,
                                       .operation_id = 42}});
  model.Add({.time_ns = 42'000, .tid = kHandler, .payload = format::OperationEnd{42}});
  model.AddSymbols(Symbols());
  model.Finish();
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  ASSERT_FALSE(operation->slow.wakers.empty());
  const Breakdown::Waker& waker = operation->slow.wakers[0];
  EXPECT_EQ(waker.doing, "janitor_compact_locked");
  EXPECT_TRUE(waker.doing_off_cpu);
  EXPECT_NE(operation->slow.sentence.find(
                "held by janitor, itself off CPU in janitor_compact_locked meanwhile"),
            std::string::npos)
      << operation->slow.sentence;
  EXPECT_NE(ReportJson(model, {}).find("\"doing_off_cpu\":true"), std::string::npos);
}

// Two waits from two call sites in one function would read the same by
// function names alone: those rows carry file:line. Two calls on one line
// (two addresses, one file:line) are one row.
TEST(ReportModelTest, WaitsThatReadTheSameByFunctionNamesShowTheirLines) {
  constexpr uint64_t kNanosleep = 0xffffffff81000020, kFirstCall = 0x404010, kSecondCall = 0x404080,
                     kSameLine = 0x404090;
  const uint64_t kernel[] = {kNanosleep};
  const uint64_t first[] = {kFirstCall}, second[] = {kSecondCall}, same_line[] = {kSameLine};
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  uint64_t t = 1'000;
  for (const uint64_t* user : {first, second, same_line}) {
    model.Add({.time_ns = t + 1'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = t + 11'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
    model.Add({.time_ns = t + 11'000, .tid = kHandler, .cpu = 0,
               .payload = format::OffCpu{.duration_ns = 10'000, .prev_state = 1,
                                         .user_stack = std::span<const uint64_t>(user, 1),
                                         .kernel_stack = kernel}});
    t += 11'000;
  }
  v1::SymbolTable symbols = Symbols();
  auto name = [&](uint32_t pid, uint64_t address, uint32_t mapping, uint32_t line) {
    auto* entry = symbols.add_addresses();
    entry->set_pid(pid);
    entry->set_address(address);
    entry->set_mapping(mapping);
    auto* frame = entry->add_frames();
    frame->set_function(pid == 0 ? "do_nanosleep" : "locker");
    if (line != 0) {
      frame->set_file("/src/svc.c");
      frame->set_line(line);
    }
  };
  name(0, kNanosleep, 0, 0);
  name(kPid, kFirstCall, 2, 10);
  name(kPid, kSecondCall, 2, 20);
  name(kPid, kSameLine, 2, 20);
  model.AddSymbols(symbols);
  model.Finish();
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("0.020 ms sleep: do_nanosleep [k] ← locker (svc.c:20)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("0.010 ms sleep: do_nanosleep [k] ← locker (svc.c:10)"), std::string::npos)
      << text;
}

// The sentence gives the main kind of wait its own share, not every
// blocked nanosecond's, and the function its own share when other code
// waited that way too.
TEST(ReportModelTest, TheSentenceGivesTheMainWaitAndItsFunctionTheirOwnShares) {
  const uint64_t cond_in_lookup[] = {kCondWait, kLookup}, cond_in_compact[] = {kCondWait, kCompact};
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::OperationBegin{9, "request"}});
  uint64_t t = 1'000;
  // 60 µs waiting on a condition in lookup, 20 in compact, 20 on a lock.
  for (auto [user, ns] : {std::pair{std::span<const uint64_t>(cond_in_lookup), 60'000},
                          std::pair{std::span<const uint64_t>(cond_in_compact), 20'000},
                          std::pair{std::span<const uint64_t>(kBlockedUser), 20'000}}) {
    model.Add({.time_ns = t, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = t + ns, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
    model.Add({.time_ns = t + ns, .tid = kHandler, .cpu = 0,
               .payload = format::OffCpu{.duration_ns = static_cast<uint64_t>(ns), .prev_state = 1,
                                         .user_stack = user, .kernel_stack = kBlockedKernel,
                                         .operation_id = 9}});
    t += ns;
  }
  model.Add({.time_ns = t, .tid = kHandler, .payload = format::OperationEnd{9}});
  model.AddSymbols(Symbols());
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->slow.sentence,
            "slow request: 80 % blocked waiting on a condition variable or semaphore, 60 % in "
            "lookup_shared_cache");
}

// Lost scheduler events make the threads' times fall short: the report
// stops calling them exact.
TEST(ReportModelTest, LostSchedulerEventsMakeTimesNotExact) {
  ReportModel model({});
  LockWait(model, false);
  TraceVerdict verdict{.complete = false, .events = 14};
  verdict.losses.Add("sched/ring_full", 5);
  verdict.losses.Add("shim/ring_full", 7);
  const std::string text = ReportText(model, verdict);
  EXPECT_EQ(text.find("times are exact"), std::string::npos) << text;
  EXPECT_NE(text.find("times come from context switches, but 5 scheduler events were lost"),
            std::string::npos) << text;
  EXPECT_NE(ReportJson(model, verdict).find("\"times_exact\":false"), std::string::npos);
  EXPECT_NE(ReportJson(model, {}).find("\"times_exact\":true"), std::string::npos);
}

// Events of every kind lost on the way to disk (a failed write, an evicted
// segment), events written late (out of time order, not lost) or a segment
// not read whole hide switches too: that is the cause the report names, not
// a switch the kernel did not report.
TEST(ReportModelTest, EventsLostOfEveryKindAndDamagedSegmentsAreNamedAsTheCause) {
  ReportModel model({});
  LockWait(model, false);
  TraceVerdict verdict{.complete = false, .events = 14};
  verdict.losses.Add("writer/write_failed", 120);
  verdict.losses.Add("cpu_sample/ring_full", 3);
  verdict.losses.Add("merge/late", 4);
  verdict.problems.push_back("s-000002.loupe: block 4 is damaged");
  const std::string text = ReportText(model, verdict);
  EXPECT_NE(text.find("times come from context switches, but events of every kind were lost "
                      "(writer/write_failed 120), and 4 events were written out of time order, "
                      "and segments could not be read whole (1 problem(s) above)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("cpu_sample/ring_full 3)"), std::string::npos) << text;
  EXPECT_NE(ReportJson(model, verdict).find("\"times_exact\":false"), std::string::npos);

  TraceVerdict damaged_only{.complete = false, .events = 14};
  damaged_only.problems.push_back("s-000002.loupe: block 4 is damaged");
  EXPECT_NE(ReportJson(model, damaged_only).find("\"times_exact\":false"), std::string::npos);
}

// A --request whose begin probe never fired says so, and its kind shows no
// percentiles of nothing.
TEST(ReportModelTest, ARequestPairWhoseProbeNeverFiredIsSaidSo) {
  absl::StatusOr<UsdtPair> pair = ParseUsdtPair("myapp:nope..req__done");
  ASSERT_TRUE(pair.ok()) << pair.status();
  ReportModel model({.pairs = {*pair}});
  Preamble(model, 1'000);
  for (uint64_t t : {2'000, 3'000}) {
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::UsdtEvent{.probe = "myapp:req__done"}});
  }
  model.Finish();
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("myapp:nope never fired in this trace"), std::string::npos) << text;
  EXPECT_NE(text.find("(usdt): no complete request"), std::string::npos) << text;
  EXPECT_EQ(text.find("p50"), std::string::npos) << text;
  EXPECT_EQ(text.find("req__done never fired"), std::string::npos) << text;
}

// The sentence's waker is the one that ended most of the dominant kind of
// wait, not the largest waker over every kind.
TEST(ReportModelTest, TheSentencesWakerEndedTheDominantWait) {
  constexpr uint64_t kNanosleep = 0xffffffff81000030;
  const uint64_t sleep_kernel[] = {kNanosleep};
  ReportModel model({});
  BeginRequestOnCpu0(model);
  struct Wait {
    std::span<const uint64_t> kernel;
    uint64_t ns;
    uint32_t waker;
    format::WakerContext context;
  };
  // Sleep 60 µs (20 ended by the janitor, 40 by a timer), a lock 30 µs
  // (the janitor): the janitor ended more in all, the timer more sleep.
  // (The other way round, the timer's sleep straight into the janitor's
  // would be one wait the janitor ended: ATimeoutThatSleepsAgain...)
  const Wait waits[] = {{sleep_kernel, 20'000, kHolder, format::WakerContext::kTask},
                        {sleep_kernel, 40'000, kHolder, format::WakerContext::kTimer},
                        {kBlockedKernel, 30'000, kHolder, format::WakerContext::kTask}};
  uint64_t t = 1'000;
  for (const Wait& wait : waits) {
    model.Add({.time_ns = t, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = t + wait.ns, .tid = wait.waker, .cpu = 1,
               .payload = format::SchedWakeup{.woken_tid = kHandler, .context = wait.context}});
    model.Add({.time_ns = t + wait.ns, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
    model.Add({.time_ns = t + wait.ns, .tid = kHandler, .cpu = 0,
               .payload = format::OffCpu{.duration_ns = wait.ns, .prev_state = 1,
                                         .user_stack = kBlockedUser, .kernel_stack = wait.kernel,
                                         .operation_id = 3}});
    t += wait.ns;
  }
  model.Add({.time_ns = t, .tid = kHandler, .payload = format::OperationEnd{3}});
  model.AddSymbols(SymbolsAndKernel({{kNanosleep, "do_nanosleep"}}));
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  ASSERT_FALSE(request->slow.wakers.empty());
  EXPECT_EQ(request->slow.wakers[0].who.thread, "janitor");  // 50 µs in all
  EXPECT_NE(request->slow.sentence.find("sleeping"), std::string::npos) << request->slow.sentence;
  EXPECT_NE(request->slow.sentence.find("woken by a timer"), std::string::npos)
      << request->slow.sentence;
}

// A wait other than a sleep that a timer ends timed out: what it waited for
// did not come in time. Python's GIL waiter times out every 5 ms while
// another thread holds it: "woken by a timer" would name a culprit.
TEST(ReportModelTest, ALockWaitATimerEndsTimedOut) {
  ReportModel model({});
  BeginRequestOnCpu0(model);
  model.Add({.time_ns = 2'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 52'000, .tid = 0, .cpu = 1,
             .payload = format::SchedWakeup{.woken_tid = kHandler, .context = format::WakerContext::kTimer}});
  model.Add({.time_ns = 52'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 52'000, .tid = kHandler, .cpu = 0,
             .payload = format::OffCpu{.duration_ns = 50'000, .prev_state = 1, .user_stack = kBlockedUser,
                                       .kernel_stack = kBlockedKernel, .operation_id = 3}});
  model.Add({.time_ns = 53'000, .tid = kHandler, .payload = format::OperationEnd{3}});
  model.AddSymbols(Symbols());
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_NE(request->slow.sentence.find("ended by a timer (its timeout, or a timer it waited for)"),
            std::string::npos)
      << request->slow.sentence;
  EXPECT_EQ(request->slow.sentence.find("woken by a timer"), std::string::npos);
}

// PostgreSQL waits for a row lock in a sleep its deadlock check's timer
// ends after deadlock_timeout (1 s), checks, and sleeps again until the
// holder commits. The holder ended the wait; the timer only timed out a
// part of it. Work between the two (over a millisecond on the CPU) would
// make them two waits, the first the timer's.
TEST(ReportModelTest, ATimeoutThatSleepsAgainAtOnceDidNotEndTheWait) {
  for (const uint64_t recheck_ns : {uint64_t{10'000}, uint64_t{2'000'000}}) {
    ReportModel model({});
    Preamble(model, 1'000);
    model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
    model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::OperationBegin{3, "query"}});
    uint64_t t = 2'000;
    const std::pair<uint64_t, format::WakerContext> waits[] = {
        {1'000'000'000, format::WakerContext::kTimer}, {45'000'000, format::WakerContext::kTask}};
    for (const auto& [ns, context] : waits) {
      model.Add({.time_ns = t, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
      model.Add({.time_ns = t + ns, .tid = kHolder, .cpu = 1,
                 .payload = format::SchedWakeup{.woken_tid = kHandler, .context = context}});
      model.Add({.time_ns = t + ns, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
      model.Add({.time_ns = t + ns, .tid = kHandler, .cpu = 0,
                 .payload = format::OffCpu{.duration_ns = ns, .prev_state = 1,
                                           .user_stack = kBlockedUser,
                                           .kernel_stack = kBlockedKernel, .operation_id = 3}});
      t += ns + recheck_ns;
    }
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::OperationEnd{3}});
    model.AddSymbols(Symbols());
    model.Finish();
    const KindReport* query = KindNamed(model, "query");
    ASSERT_NE(query, nullptr);
    ASSERT_FALSE(query->slow.wakers.empty());
    const auto& first = query->slow.wakers[0];
    if (recheck_ns < 1'000'000) {
      EXPECT_EQ(first.who.thread, "janitor") << query->slow.sentence;
      EXPECT_EQ(first.ns, 1'045'000'000u);
      EXPECT_EQ(query->slow.sentence.find("timer"), std::string::npos) << query->slow.sentence;
    } else {
      EXPECT_NE(first.who.thread, "janitor") << "a wait the timer ended, then work, then another";
      EXPECT_EQ(first.ns, 1'000'000'000u);
    }
  }
}

// Programs under /usr/lib are the application's (PostgreSQL's server is
// /usr/lib/postgresql/15/bin/postgres); only shared libraries in the
// system's library directories are the system's.
TEST(ReportModelTest, OnlySharedLibrariesInSystemDirectoriesAreSystemCode) {
  EXPECT_TRUE(IsSystemPath("/usr/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsSystemPath("/lib/x86_64-linux-gnu/libpthread.so.0"));
  EXPECT_TRUE(IsSystemPath("/usr/lib64/libstdc++.so.6.0.30"));
  EXPECT_TRUE(IsSystemPath("/lib64/ld-linux-x86-64.so.2"));
  EXPECT_TRUE(IsSystemPath("[vdso]"));
  EXPECT_FALSE(IsSystemPath("/usr/lib/postgresql/15/bin/postgres"));
  EXPECT_FALSE(IsSystemPath("/usr/lib/postgresql/15/lib/plpgsql.so"));
  EXPECT_FALSE(IsSystemPath("/usr/lib/jvm/java-17/bin/java"));
  EXPECT_FALSE(IsSystemPath("/usr/bin/redis-server"));
  EXPECT_FALSE(IsSystemPath("/srv/app/libplugin.so"));
}

// A sample taken inside the kernel's uprobe handling (a BPF helper
// reserving ring space, the handler itself) is the tracer's cost: counted
// under its own name, never as the request's hot function.
TEST(ReportModelTest, SamplesInUprobeHandlingAreTheTracersNotTheRequests) {
  constexpr uint64_t kReserve = 0xffffffff81000100, kDispatch = 0xffffffff81000200,
                     kSwbp = 0xffffffff81000300;
  const uint64_t tracer_kernel[] = {kReserve, kDispatch, kSwbp};
  ReportModel model({});
  BeginRequestOnCpu0(model);
  for (uint64_t t = 2'000; t < 5'000; t += 1'000) {
    model.Add({.time_ns = t, .tid = kHandler, .cpu = 0,
               .payload = format::CpuSample{.user_stack = kHolderUser, .kernel_stack = tracer_kernel}});
  }
  // The trap after the kernel single-stepped a probed instruction, on its
  // way back to user mode.
  constexpr uint64_t kTrapExit = 0xffffffff81000500, kDebugTrap = 0xffffffff81000600;
  const uint64_t step_kernel[] = {kTrapExit, kDebugTrap};
  model.Add({.time_ns = 6'000, .tid = kHandler, .cpu = 0,
             .payload = format::CpuSample{.user_stack = kHolderUser, .kernel_stack = step_kernel}});
  // An mmap passes uprobe_mmap whether or not a probe is placed: not the tracer's.
  constexpr uint64_t kMmap = 0xffffffff81000400;
  const uint64_t mmap_kernel[] = {kMmap};
  model.Add({.time_ns = 8'000, .tid = kHandler, .cpu = 0,
             .payload = format::CpuSample{.user_stack = kHolderUser, .kernel_stack = mmap_kernel}});
  model.Add({.time_ns = 9'000, .tid = kHandler, .cpu = 0,
             .payload = format::CpuSample{.user_stack = kHolderUser}});
  model.Add({.time_ns = 10'000, .tid = kHandler, .payload = format::OperationEnd{3}});
  model.AddSymbols(SymbolsAndKernel({{kReserve, "__bpf_ringbuf_reserve"},
                                      {kDispatch, "uprobe_dispatcher"},
                                      {kSwbp, "handle_swbp"},
                                      {kMmap, "uprobe_mmap"},
                                      {kTrapExit, "irqentry_exit_to_user_mode"},
                                      {kDebugTrap, "exc_debug_user"}}));
  const KindReport* request = FinishedWithSlowSamples(model);
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->slow.functions[0].first, kUprobeHandling);
  EXPECT_EQ(request->slow.functions[0].second, 4u);
  for (const auto& [function, samples] : request->slow.functions) {
    EXPECT_NE(function, "__bpf_ringbuf_reserve");
  }
  EXPECT_TRUE(std::ranges::any_of(request->slow.functions,
                                  [](const auto& row) { return row.first == "uprobe_mmap"; }));
  const auto top = model.TopFunctions(5);
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(top[0].name, kUprobeHandling);
  EXPECT_EQ(top[0].self, 4u);
}

// A timer's sample due while interrupts were off is taken where they come
// back on: the time went to the function that turned them on again, not
// to the primitive (pvm_irq_enable led redis-server's slow calls).
TEST(ReportModelTest, ASampleHeldBackByInterruptsOffCountsForItsCaller) {
  constexpr uint64_t kEnable = 0xffffffff81000100, kEnableThunk = 0xffffffff81000200,
                     kUnlock = 0xffffffff81000300, kReadable = 0xffffffff81000400,
                     kOnlyEnable = 0xffffffff81000500;
  const uint64_t socket_kernel[] = {kEnable, kEnableThunk, kUnlock, kReadable};
  const uint64_t enable_only_kernel[] = {kOnlyEnable};
  ReportModel model({});
  BeginRequestOnCpu0(model);
  for (uint64_t t = 2'000; t < 5'000; t += 1'000) {
    model.Add({.time_ns = t, .tid = kHandler, .cpu = 0,
               .payload = format::CpuSample{.user_stack = kHolderUser, .kernel_stack = socket_kernel}});
  }
  model.Add({.time_ns = 6'000, .tid = kHandler, .cpu = 0,
             .payload = format::CpuSample{.user_stack = kHolderUser, .kernel_stack = enable_only_kernel}});
  model.Add({.time_ns = 10'000, .tid = kHandler, .payload = format::OperationEnd{3}});
  model.AddSymbols(SymbolsAndKernel({{kEnable, "pvm_irq_enable"},
                                      {kEnableThunk, "__raw_callee_save_pvm_irq_enable"},
                                      {kUnlock, "_raw_spin_unlock_irqrestore"},
                                      {kReadable, "sock_def_readable"},
                                      {kOnlyEnable, "_raw_spin_unlock_irq"}}));
  const KindReport* request = FinishedWithSlowSamples(model);
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->slow.functions[0].first, "sock_def_readable");
  EXPECT_EQ(request->slow.functions[0].second, 3u);
  // With no kernel caller left the sample stays in the kernel: the user
  // code was not running.
  ASSERT_EQ(request->slow.functions.size(), 2u);
  EXPECT_EQ(request->slow.functions[1].first, "_raw_spin_unlock_irq");
  const auto top = model.TopFunctions(5);
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(top[0].name, "sock_def_readable");
  EXPECT_EQ(top[0].self, 3u);
}

// What a probe costs is also sampled where no handler frame is left: on a
// trap's way back to user mode (the timer's sample waited while the
// handler ran with interrupts off), in the trampolines the kernel maps in
// and the syscalls they make. Seen on redis-server with a probe on `call`:
// 99 of 436 samples read "call → asm_exc_int3 → pvm_irq_enable" and were
// counted as the requests' hot function.
TEST(ReportModelTest, ATrapsWayOutAndTheTrampolinesAreUprobeHandling) {
  const auto kernel = [](std::string name) { return NamedFrame{.function = std::move(name), .kernel = true}; };
  const auto user = [](std::string name) { return NamedFrame{.function = std::move(name)}; };
  const NamedFrame call = user("call"), process = user("processCommand");
  const std::vector<NamedFrame> breakpoint_exit = {
      kernel("pvm_irq_enable"), kernel("irqentry_exit_to_user_mode"), kernel("asm_exc_int3"), call, process};
  const std::vector<NamedFrame> single_step_exit = {kernel("irqentry_exit_to_user_mode"),
                                                    kernel("asm_exc_debug"), process};
  const std::vector<NamedFrame> trampoline_syscall_exit = {
      kernel("pvm_irq_enable"), kernel("do_syscall_64"), kernel("entry_SYSCALL_64_after_hwframe"),
      user("[uprobes-trampoline]+0xd"), user("loupe_span_end")};
  const std::vector<NamedFrame> in_trampoline = {user("[uprobes-trampoline]+0xd"), user("loupe_span_end")};
  const std::vector<NamedFrame> probe_syscall = {kernel("_copy_from_user"), kernel("__x64_sys_uprobe"),
                                                 kernel("do_syscall_64"), user("loupe_span_end")};
  for (const auto* frames : {&breakpoint_exit, &single_step_exit, &trampoline_syscall_exit, &in_trampoline,
                             &probe_syscall}) {
    EXPECT_TRUE(InUprobeHandling(*frames)) << frames->front().function << " < " << (*frames)[1].function;
  }
  // A breakpoint in the kernel (a kprobe, code patching) unwinds on into
  // the kernel code it stopped; a syscall's own exit is the application's.
  const std::vector<NamedFrame> kernel_breakpoint = {kernel("pvm_irq_enable"), kernel("asm_exc_int3"),
                                                     kernel("tcp_sendmsg"), kernel("do_syscall_64"), call};
  const std::vector<NamedFrame> write_exit = {kernel("pvm_irq_enable"), kernel("do_syscall_64"),
                                              kernel("entry_SYSCALL_64_after_hwframe"), user("__libc_write"), call};
  const std::vector<NamedFrame> user_only = {call, process};
  for (const auto* frames : {&kernel_breakpoint, &write_exit, &user_only}) {
    EXPECT_FALSE(InUprobeHandling(*frames)) << frames->front().function << " < " << (*frames)[1].function;
  }
}

// A user stack whose walk stopped early (a new child's unwind tables not
// loaded yet) ends in a mark: read, it says its callers are unknown, and
// the mark is never the application's function.
TEST(ReportModelTest, AStackCutShortSaysSo) {
  StackProfile stacks;
  stacks.Add({.tid = kPid, .payload = format::ProcessInfo{.name = "lock_service"}});
  const uint64_t user[] = {kLockWait, format::kUnwindStoppedFrame};
  const uint32_t id = stacks.Add({.time_ns = 5, .tid = kPid, .payload = format::CpuSample{.user_stack = user}});
  stacks.AddSymbols(Symbols());
  const std::vector<NamedFrame> frames = stacks.StackFrames(id);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].function, "__lll_lock_wait");
  EXPECT_EQ(frames[1].function, kUnwindStoppedName);
  EXPECT_EQ(stacks.InnermostApplicationFunction(id), "__lll_lock_wait");
}

TEST(ReportModelTest, ALockWaitNamesTheLockTheFunctionAndTheHolder) {
  ReportModel model({});
  LockWait(model, false);
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  const Breakdown& slow = operation->slow;
  EXPECT_EQ(slow.count, 1u);
  EXPECT_EQ(slow.duration_ns, 49'100u);
  EXPECT_EQ(slow.on_cpu_ns, 1'000u + 600u);  // exact, from switches
  EXPECT_EQ(slow.off_cpu_ns.at("lock"), 47'000u);
  EXPECT_EQ(slow.runq_ns, 500u);  // counted once: not inside the lock wait too
  EXPECT_EQ(slow.unaccounted_ns, 0u);
  ExpectPartsAddUp(slow);
  EXPECT_EQ(slow.dominant, "blocked");
  EXPECT_EQ(slow.dominant_class, "lock");
  ASSERT_FALSE(slow.stacks.empty());
  EXPECT_EQ(slow.stacks[0].function, "lookup_shared_cache");  // libc's frames are not the app's
  ASSERT_FALSE(slow.wakers.empty());
  EXPECT_EQ(slow.wakers[0].who.thread, "janitor");
  EXPECT_EQ(slow.wakers[0].doing, "janitor_compact_locked");
  EXPECT_EQ(slow.sentence,
            "slow request: 96 % blocked on a lock in lookup_shared_cache, held by janitor in "
            "janitor_compact_locked");

  // The operation and its span cover one extent: listed once.
  ASSERT_EQ(model.slowest().size(), 1u);
  EXPECT_EQ(model.slowest()[0].also.size(), 1u);
  EXPECT_EQ(model.slowest()[0].args, std::vector<int64_t>{42});
  ExpectPartsAddUp(model.slowest()[0].breakdown);

  const std::string text = ReportText(model, {.events = 14});
  std::string first_screen;
  size_t line = 0, at = 0;
  while (line++ < 30 && at != std::string::npos) {
    const size_t next = text.find('\n', at);
    first_screen += text.substr(at, next == std::string::npos ? next : next + 1 - at);
    at = next == std::string::npos ? next : next + 1;
  }
  EXPECT_NE(first_screen.find("held by janitor in janitor_compact_locked"), std::string::npos)
      << text;
  // Percentiles come from histogram buckets: marked, and as many digits as they hold.
  EXPECT_NE(text.find("percentiles (≈) are within 1.6 %"), std::string::npos) << text;
  EXPECT_NE(text.find("1 requests, p50 ≈0.049 ms, p90 ≈0.049 ms, p99 ≈0.049 ms, max 0.049 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(ReportJson(model, {}).find("\"dominant_class\":\"lock\""), std::string::npos);
}

// A request whose cgroup spends its CPU quota: preempted with the quota
// spent, it waits 60 µs while its CPU idles (and a kworker runs 2 µs), then
// 5 µs behind the janitor after an ordinary preemption. The quota is the
// cause: not the idle task, not the kworker.
TEST(ReportModelTest, AThrottledWaitBlamesTheCpuQuotaNotWhoeverHeldTheCpu) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 10'000, .tid = kHandler, .cpu = 0,
             .payload = format::SchedSwitch{0, format::kSwitchThrottled}});
  model.Add({.time_ns = 60'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{99, 0}});
  model.Add({.time_ns = 60'000, .tid = 99, .payload = format::ThreadInfo{
                                              .pid = 99, .name = "kworker/0:1", .foreign = true,
                                              .process_name = "kworker/0:1"}});
  model.Add({.time_ns = 62'000, .tid = 99, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 70'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 71'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{kHolder, 0}});
  model.Add({.time_ns = 76'000, .tid = kHolder, .cpu = 0, .payload = format::SchedSwitch{kHandler, 1}});
  model.Add({.time_ns = 80'000, .tid = kHandler, .payload = format::OperationEnd{7}});
  model.AddSymbols(Symbols());
  model.Finish();

  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  const Breakdown& slow = operation->slow;
  EXPECT_EQ(slow.duration_ns, 78'000u);
  EXPECT_EQ(slow.runq_ns, 65'000u) << "throttled time is run-queue time, as schedstat counts it";
  EXPECT_EQ(slow.throttled_ns, 60'000u);
  ExpectPartsAddUp(slow);
  EXPECT_EQ(slow.dominant, "runqueue");
  ASSERT_EQ(slow.holders.size(), 1u) << "only the wait the quota did not cause has holders";
  EXPECT_EQ(slow.holders[0].who.thread, "janitor");
  EXPECT_EQ(slow.holders[0].ns, 5'000u);
  EXPECT_EQ(slow.sentence, "slow request: 83 % waiting to run, 77 % throttled by its cgroup's CPU quota");
  const std::string text = ReportText(model, {.events = 12});
  EXPECT_NE(text.find("run-queue 0.065 ms (throttled 0.060 ms)"), std::string::npos) << text;
  EXPECT_NE(ReportJson(model, {}).find("\"throttled_ns\":60000"), std::string::npos);
}

// A sibling thread took the handler's CPU: what it ran meanwhile, from its
// own samples, is named with it; a holder with no samples (foreign) is not.
TEST(ReportModelTest, ATracedCpuHolderIsNamedWithWhatItRan) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{kHolder, 0}});
  model.Add({.time_ns = 20'000, .tid = kHolder, .cpu = 0,
             .payload = format::CpuSample{.user_stack = kHolderUser}});
  model.Add({.time_ns = 40'000, .tid = kHolder, .cpu = 0, .payload = format::SchedSwitch{99, 0}});
  model.Add({.time_ns = 40'000, .tid = 99, .payload = format::ThreadInfo{
                                              .pid = 99, .name = "noisy", .foreign = true,
                                              .process_name = "noisy"}});
  model.Add({.time_ns = 45'000, .tid = 99, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 46'000, .tid = kHandler, .payload = format::OperationEnd{7}});
  model.AddSymbols(Symbols());
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  const Breakdown& slow = request->slow;
  EXPECT_EQ(slow.dominant, "runqueue");
  ASSERT_EQ(slow.holders.size(), 2u);
  EXPECT_EQ(slow.holders[0].who.thread, "janitor");
  EXPECT_EQ(slow.holders[0].ns, 37'000u);
  EXPECT_EQ(slow.holders[0].doing, "janitor_compact_locked");
  EXPECT_EQ(slow.holders[1].who.thread, "noisy");
  EXPECT_EQ(slow.holders[1].doing, "");
  EXPECT_EQ(slow.sentence,
            "slow request: 95 % waiting for a CPU, the CPU held by janitor (lock_service) in "
            "janitor_compact_locked");
  EXPECT_NE(ReportText(model, {.events = 12}).find("janitor (tid 12, lock_service) 0.037 ms (in "
                                                   "janitor_compact_locked, sampled)"),
            std::string::npos)
      << ReportText(model, {.events = 12});
  EXPECT_NE(ReportJson(model, {}).find("\"doing\":\"janitor_compact_locked\""), std::string::npos);
  // The janitor served no request: its row has no inside line.
  const std::string text = ReportText(model, {.events = 12});
  EXPECT_NE(text.find("  janitor (tid 12, lock_service)\n      outside: "), std::string::npos) << text;
  EXPECT_NE(text.find("  worker-0 (tid 11, lock_service)\n      inside:  "), std::string::npos);
}

// The idle task wakes nobody: an interrupt taken while the CPU idled did,
// and the sentence says so once.
TEST(ReportModelTest, AWakeupFromTheIdleCpuIsAnInterrupts) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{9, "request"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 40'000, .tid = 0, .cpu = 0,
             .payload = format::SchedWakeup{.woken_tid = kHandler, .target_cpu = 0}});
  model.Add({.time_ns = 40'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 40'000, .tid = kHandler, .cpu = 0,
             .payload = format::OffCpu{.duration_ns = 37'000, .prev_state = 1,
                                       .user_stack = kBlockedUser, .kernel_stack = kBlockedKernel}});
  model.Add({.time_ns = 41'000, .tid = kHandler, .payload = format::OperationEnd{9}});
  model.AddSymbols(Symbols());
  model.Finish();
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->slow.sentence,
            "slow request: 95 % blocked on a lock in lookup_shared_cache, woken by an interrupt");
}

// A switch-in louped placed itself is not the kernel's report: said, not hidden.
TEST(ReportModelTest, SwitchInsLoupedPlacedAreCountedAndSaid) {
  ReportModel model({});
  LockWait(model, false);
  EXPECT_EQ(model.inferred_switches(), 0u);
  EXPECT_EQ(ReportText(model, {.events = 14}).find("did not report"), std::string::npos);

  ReportModel inferred({});
  Preamble(inferred, 1'000);
  inferred.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  inferred.Add({.time_ns = 2'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{kHolder, 0}});
  inferred.Add({.time_ns = 3'000, .tid = kHolder, .cpu = 0,
                .payload = format::SchedSwitch{kHandler, format::kSwitchInferred}});
  inferred.Finish();
  EXPECT_EQ(inferred.inferred_switches(), 1u);
  EXPECT_NE(ReportText(inferred, {.events = 6}).find("but 1 switch-in(s) the kernel did not report"),
            std::string::npos);
  EXPECT_NE(ReportJson(inferred, {}).find("\"inferred_switches\":1"), std::string::npos);
}

// A switch-in neither the kernel reported nor louped placed: the handler's
// time until its own next record is unaccounted, and the report says how
// much and why instead of "times are exact".
TEST(ReportModelTest, TimeNoSwitchPlacesIsSaidAndCountedNotCalledExact) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::OperationBegin{42, "request"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 0}});
  // Preempted at 3 µs; its switch-in is missing, its end at 10 µs proves it ran.
  model.Add({.time_ns = 10'000, .tid = kHandler, .payload = format::OperationEnd{42}});
  model.Add({.time_ns = 11'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Finish();
  EXPECT_EQ(model.unplaced_stretches(), 1u);
  EXPECT_EQ(model.unplaced_ns(), 7'000u);
  EXPECT_FALSE(model.times_exact(0));
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->slow.unaccounted_ns, 7'000u);
  EXPECT_EQ(request->slow.runq_ns, 0u);  // not guessed to be the run-queue
  const std::string text = ReportText(model, {.events = 8});
  EXPECT_EQ(text.find("times are exact"), std::string::npos);
  EXPECT_NE(text.find("1 stretch(es) of threads' time (0.007 ms) have no switch in the trace"),
            std::string::npos);
  const ThreadReport* handler = nullptr;
  for (const ThreadReport& thread : model.threads()) {
    if (thread.thread.tid == kHandler) handler = &thread;
  }
  ASSERT_NE(handler, nullptr);
  EXPECT_EQ(handler->inside.unaccounted_ns, 7'000u);  // the thread table shows it too
  const std::string json = ReportJson(model, {.events = 8});
  EXPECT_NE(json.find("\"times_exact\":false"), std::string::npos);
  EXPECT_NE(json.find("\"unplaced\":{\"stretches\":1,\"ns\":7000,\"last_end_ns\":10000}"),
            std::string::npos);

  ReportModel exact({});
  LockWait(exact, false);
  EXPECT_EQ(exact.unplaced_stretches(), 0u);
  EXPECT_TRUE(exact.times_exact(0));
}

// Read without its session's first segment (evicted, or left out), a
// trace cannot say what a thread described in its first preamble did
// before its first record there: unaccounted and said, not dropped. With
// segment 0, as before (the first record is where the trace begins).
TEST(ReportModelTest, ATraceWithoutItsFirstSegmentSaysWhatItCannotPlace) {
  for (const uint64_t sequence : {uint64_t{3}, uint64_t{0}}) {
    ReportModel model({});
    v1::SegmentHeader header;
    header.set_session_id("s");
    header.set_sequence(sequence);
    model.AddHeader(header);
    Preamble(model, 1'000);
    model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kHolder, 0}});
    model.Add({.time_ns = 4'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = 9'000, .tid = kHolder, .cpu = 1, .payload = format::SchedSwitch{0, 1}});
    model.Finish();
    EXPECT_EQ(model.starts_mid_session(), sequence != 0);
    const ThreadReport* handler = nullptr;
    for (const ThreadReport& thread : model.threads()) {
      if (thread.thread.tid == kHandler) handler = &thread;
    }
    ASSERT_NE(handler, nullptr);
    if (sequence != 0) {
      EXPECT_EQ(handler->outside.unaccounted_ns, 3'000u) << "from the preamble to its switch-out";
      EXPECT_EQ(model.unplaced_stretches(), 1u);
      EXPECT_NE(ReportText(model, {.events = 8}).find("lacks its session's first segments"),
                std::string::npos);
    } else {
      EXPECT_EQ(handler->outside.unaccounted_ns, 0u);
      EXPECT_EQ(model.unplaced_stretches(), 0u);
    }
  }
}

// rec() recurses four deep; an exception from the fourth is caught in the
// second, which returns, then the first. louped paired each return with
// its own call by the stack pointer (duration_ns): the report does too,
// and the two calls the exception left end unpaired, not with a return.
TEST(ReportModelTest, AReturnEndsItsOwnCallNotOneAnExceptionLeft) {
  ReportModel model({});
  v1::SegmentHeader header;
  (*header.mutable_config())["uprobes"] = "svc:rec%return";
  model.AddHeader(header);
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  for (uint64_t t : {2'000, 3'000, 4'000, 5'000}) {
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::UprobeEntry{.probe = "svc:rec"}});
  }
  model.Add({.time_ns = 9'000, .tid = kHandler,
             .payload = format::UprobeReturn{.probe = "svc:rec", .duration_ns = 6'000}});
  model.Add({.time_ns = 10'000, .tid = kHandler,
             .payload = format::UprobeReturn{.probe = "svc:rec", .duration_ns = 8'000}});
  model.Finish();
  const KindReport* rec = KindNamed(model, "svc:rec");
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->count, 2u);
  EXPECT_EQ(rec->max_ns, 8'000u);
  EXPECT_EQ(rec->unpaired_begins, 2u);
  EXPECT_EQ(rec->total_ns, 14'000u) << "rec(2), 3 µs to 9 µs, and rec(1), 2 µs to 10 µs";
}

// handle() calls step(), which throws; handle's caller catches at 6 µs:
// louped wrote both calls' ends there, marked unwound. They are requests
// like any, labelled, and the thread is outside requests from the catch on.
TEST(ReportModelTest, CallsAnExceptionUnwoundEndAtItsCatch) {
  ReportModel model({});
  v1::SegmentHeader header;
  (*header.mutable_config())["uprobes"] = "svc:handle%return svc:step%return";
  model.AddHeader(header);
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::UprobeEntry{.probe = "svc:handle"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .payload = format::UprobeEntry{.probe = "svc:step"}});
  model.Add({.time_ns = 6'000, .tid = kHandler,
             .payload = format::UprobeReturn{.probe = "svc:step", .duration_ns = 3'000, .unwound = format::Unwound::kByException}});
  model.Add({.time_ns = 6'000, .tid = kHandler,
             .payload = format::UprobeReturn{.probe = "svc:handle", .duration_ns = 4'000, .unwound = format::Unwound::kByException}});
  model.Add({.time_ns = 10'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}});
  model.Finish();
  for (const char* name : {"svc:handle", "svc:step"}) {
    const KindReport* kind = KindNamed(model, name);
    ASSERT_NE(kind, nullptr) << name;
    EXPECT_EQ(kind->count, 1u) << name;
    EXPECT_EQ(kind->unwound, 1u) << name;
    EXPECT_EQ(kind->unpaired_begins, 0u) << name;
  }
  EXPECT_EQ(KindNamed(model, "svc:handle")->max_ns, 4'000u);
  const ThreadReport* handler = nullptr;
  for (const ThreadReport& thread : model.threads()) {
    if (thread.thread.tid == kHandler) handler = &thread;
  }
  ASSERT_NE(handler, nullptr);
  EXPECT_EQ(handler->inside.on_cpu_ns, 4'000u) << "from the call to the catch";
  EXPECT_EQ(handler->outside.on_cpu_ns, 5'000u) << "before the call, and after the catch";
  ASSERT_FALSE(model.slowest().empty());
  EXPECT_EQ(model.slowest().front().unwound, format::Unwound::kByException);
  const std::string text = ReportText(model, {.events = 8});
  EXPECT_NE(text.find("1 of them left by an exception, not a return"), std::string::npos) << text;
  EXPECT_NE(text.find("left by an exception (to its catch)"), std::string::npos) << text;
  EXPECT_NE(ReportJson(model, {}).find("\"unwound\":1"), std::string::npos);
}

// Two sessions of one service read together (a directory that collects
// them): a request begun at the end of the first and an end at the start
// of the second are not one request; the thread's time between the two
// sessions was not traced and is in none of its times.
TEST(ReportModelTest, RequestsAndThreadTimesDoNotSpanSessions) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .payload = format::ClockSync{}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  model.Add({.time_ns = 8'000, .tid = kHandler, .payload = format::OperationBegin{42, "request"}});
  model.Add({.time_ns = 10'000, .payload = format::ClockSync{}});  // the first session stops
  constexpr uint32_t kSecond = 1;
  for (const format::Record& record :
       {format::Record{.time_ns = 50'000, .tid = kPid, .payload = format::ProcessInfo{.name = "lock_service"}},
        format::Record{.time_ns = 50'000, .tid = kHandler, .payload = format::ThreadInfo{.pid = kPid, .name = "worker-0"}},
        format::Record{.time_ns = 50'000, .payload = format::ClockSync{}},
        format::Record{.time_ns = 51'000, .tid = kHandler, .payload = format::OperationEnd{42}},
        format::Record{.time_ns = 60'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}}}) {
    model.Add(record, kSecond);
  }
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->count, 0u);
  EXPECT_EQ(request->unpaired_begins, 1u);
  EXPECT_EQ(model.ends_without_begin(), 1u);
  const ThreadReport* handler = nullptr;
  for (const ThreadReport& thread : model.threads()) {
    if (thread.thread.tid == kHandler) handler = &thread;
  }
  ASSERT_NE(handler, nullptr);
  EXPECT_EQ(handler->inside.on_cpu_ns, 2'000u) << "to the first session's end";
  EXPECT_EQ(handler->outside.on_cpu_ns, 7'000u + 10'000u) << "each session's own";
  EXPECT_EQ(handler->outside.unaccounted_ns, 0u) << "between the sessions: not in its times";
  EXPECT_EQ(model.unplaced_stretches(), 0u);
  EXPECT_EQ(model.sessions(), 2u);
  EXPECT_EQ(model.threads_across_sessions(), 2u);  // the handler, and the main thread described
  EXPECT_EQ(model.threads_in_overlapping_sessions(), 0u);
  EXPECT_NE(ReportText(model, {}).find("2 sessions are read together"), std::string::npos);
}

// Two sessions of two services at the same time (a directory that collects
// both): where one's thread switches to the other's, both record that
// switch. It is one switch, and neither session takes the other's thread.
TEST(ReportModelTest, SessionsOfTwoServicesShareSwitchesButNotThreads) {
  ReportModel model({});
  constexpr uint32_t kFirst = 0, kSecond = 1, kOtherPid = 900;
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .payload = format::ClockSync{}}, kFirst);
  model.Add({.time_ns = 1'000, .tid = kOtherPid, .payload = format::ProcessInfo{.name = "cache"}}, kSecond);
  model.Add({.time_ns = 1'000, .tid = kOtherPid, .payload = format::ThreadInfo{.pid = kOtherPid, .name = "cache"}},
            kSecond);
  model.Add({.time_ns = 1'000, .payload = format::ClockSync{}}, kSecond);
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}}, kFirst);
  model.Add({.time_ns = 1'500, .tid = kHandler, .payload = format::OperationBegin{5, "request"}}, kFirst);
  for (uint32_t session : {kFirst, kSecond}) {  // preempted by the cache
    model.Add({.time_ns = 2'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{kOtherPid, 0}}, session);
  }
  for (uint32_t session : {kFirst, kSecond}) {
    model.Add({.time_ns = 5'000, .tid = kOtherPid, .cpu = 0, .payload = format::SchedSwitch{kHandler, 1}}, session);
  }
  model.Add({.time_ns = 6'000, .tid = kHandler, .payload = format::OperationEnd{5}}, kFirst);
  model.Add({.time_ns = 7'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}}, kFirst);
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->count, 1u);
  EXPECT_EQ(request->max_ns, 4'500u);
  EXPECT_EQ(request->slow.runq_ns, 3'000u) << "queued behind the cache, once";
  EXPECT_EQ(request->unpaired_begins + request->unpaired_ends, 0u);
  EXPECT_EQ(model.threads_in_overlapping_sessions(), 0u);
  EXPECT_EQ(model.threads_across_sessions(), 0u);
  EXPECT_EQ(model.unplaced_stretches(), 0u);
}

// Two sessions traced the same thread at once: read together, its events
// are there twice. The later session's are used while it lasts, then the
// earlier one's again, and the report says so.
TEST(ReportModelTest, OverlappingSessionsCountEachEventOnce) {
  ReportModel model({});
  Preamble(model, 1'000);
  model.Add({.time_ns = 1'000, .payload = format::ClockSync{}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  constexpr uint32_t kFirst = 0, kSecond = 1;
  const std::vector<std::pair<format::Record, uint32_t>> records = {
      {{.time_ns = 2'000, .tid = kPid, .payload = format::ProcessInfo{.name = "lock_service"}}, kSecond},
      {{.time_ns = 2'000, .tid = kHandler, .payload = format::ThreadInfo{.pid = kPid, .name = "worker-0"}}, kSecond},
      {{.time_ns = 2'000, .payload = format::ClockSync{}}, kSecond},
      {{.time_ns = 3'000, .tid = kHandler, .payload = format::OperationBegin{7, "request"}}, kFirst},
      {{.time_ns = 3'000, .tid = kHandler, .payload = format::OperationBegin{7, "request"}}, kSecond},
      {{.time_ns = 5'000, .tid = kHandler, .payload = format::OperationEnd{7}}, kFirst},
      {{.time_ns = 5'000, .tid = kHandler, .payload = format::OperationEnd{7}}, kSecond},
      {{.time_ns = 6'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}}, kFirst},
      {{.time_ns = 6'000, .tid = kHandler, .cpu = 0, .payload = format::SchedSwitch{0, 1}}, kSecond},
  };
  for (const auto& [record, session] : records) model.Add(record, session);
  // The later session stops; the earlier one goes on, and is used again.
  model.EndSession(kSecond);
  model.Add({.time_ns = 7'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}}, kFirst);
  model.Add({.time_ns = 8'000, .tid = kHandler, .payload = format::OperationBegin{9, "request"}}, kFirst);
  model.Add({.time_ns = 11'000, .tid = kHandler, .payload = format::OperationEnd{9}}, kFirst);
  model.Finish();
  const KindReport* request = KindNamed(model, "request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->count, 2u);
  EXPECT_EQ(request->max_ns, 3'000u);
  EXPECT_EQ(request->unpaired_begins + request->unpaired_ends, 0u);
  EXPECT_EQ(model.threads_in_overlapping_sessions(), 1u);
  EXPECT_NE(ReportText(model, {}).find("traced by two sessions at the same time"), std::string::npos);
}

// The scheduler's programs record from the start; the probes that see
// requests come up later. The thread table says from when requests count.
TEST(ReportModelTest, TheThreadTableSaysFromWhenRequestsCouldBeSeen) {
  ReportModel late({});
  Preamble(late, 1'000);
  late.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kHandler, 0}});
  late.Add({.time_ns = 20'001'000, .tid = kHandler, .payload = format::OperationBegin{42, "request"}});
  late.Add({.time_ns = 20'002'000, .tid = kHandler, .payload = format::OperationEnd{42}});
  late.Finish();
  EXPECT_EQ(late.first_request_event_ns(), 20'001'000u);
  EXPECT_NE(ReportText(late, {.events = 6}).find("(the first request begins or ends at +20.000 ms"),
            std::string::npos)
      << ReportText(late, {.events = 6});
  EXPECT_NE(ReportJson(late, {}).find("\"first_request_event_ns\":20001000"), std::string::npos);

  ReportModel early({});
  LockWait(early, false);
  EXPECT_EQ(ReportText(early, {.events = 14}).find("the first request begins"), std::string::npos);
}

// What the trace's trailers note (an exec that left probes behind) is in
// the report's verdict block, text and JSON.
TEST(ReportModelTest, TheTrailersNotesAreInTheVerdict) {
  ReportModel model({});
  LockWait(model, false);
  const TraceVerdict verdict{.notes = {"pid 10 called exec into another program (/bin/x)"}, .events = 14};
  EXPECT_NE(ReportText(model, verdict).find("\n  note: pid 10 called exec into another program"),
            std::string::npos);
  EXPECT_NE(ReportJson(model, verdict).find("\"notes\":[\"pid 10 called exec"), std::string::npos);
}

TEST(ReportModelTest, ARequestCrossingIntoANewSegmentIsOneRequest) {
  ReportModel model({});
  LockWait(model, /*new_segment_midway=*/true);
  const KindReport* span = KindNamed(model, "handle");
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->count, 1u);
  EXPECT_EQ(span->slow.duration_ns, 48'900u);
  EXPECT_EQ(span->slow.off_cpu_ns.at("lock"), 47'000u);
  ExpectPartsAddUp(span->slow);
}

const ThreadReport* ThreadNamed(const ReportModel& model, std::string_view name) {
  for (const ThreadReport& thread : model.threads()) {
    if (thread.thread.thread == name) return &thread;
  }
  return nullptr;
}

// --until 20 µs (the trace starts at 1 µs): the request that began inside
// keeps its whole anatomy, but the threads' times and the hot functions are
// of the window alone.
TEST(ReportModelTest, ThreadTablesKeepToTheWindowWhileRequestsBegunInItStayWhole) {
  ReportModel model({.until_ns = 20'000});
  LockWait(model, false);
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->slow.duration_ns, 49'100u);
  EXPECT_EQ(operation->slow.off_cpu_ns.at("lock"), 47'000u);
  ExpectPartsAddUp(operation->slow);

  const ThreadReport* handler = ThreadNamed(model, "worker-0");
  ASSERT_NE(handler, nullptr);
  EXPECT_EQ(handler->outside.on_cpu_ns, 1'000u);  // 1..2 µs
  EXPECT_EQ(handler->inside.on_cpu_ns, 1'000u);   // 2..3 µs
  EXPECT_EQ(handler->inside.off_cpu_ns.at("lock"), 18'000u);  // 3..21 µs of the 47 µs wait
  EXPECT_EQ(handler->inside.runq_ns, 0u);
  const auto top = model.TopFunctions(5);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].name, "janitor_compact_locked");
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("top on-CPU functions from +0.000 s to +0.000 s (sampled, 1 samples"),
            std::string::npos)
      << "the tables say they are of the window:\n"
      << text;

  ReportModel later({.since_ns = 10'000});
  LockWait(later, false);
  EXPECT_TRUE(later.TopFunctions(5).empty()) << "the one sample is at 5 µs, before the window";
  const ThreadReport* waiting = ThreadNamed(later, "worker-0");
  ASSERT_NE(waiting, nullptr);
  // The request began before the window: none is listed, its time is outside requests.
  EXPECT_EQ(KindNamed(later, "request"), nullptr);
  EXPECT_EQ(waiting->outside.off_cpu_ns.at("lock"), 39'000u);  // 11..50 µs
  EXPECT_EQ(waiting->outside.runq_ns, 500u);
  EXPECT_EQ(waiting->outside.on_cpu_ns, 600u);  // 50.5..51.1 µs
}

// Two threads wait 10 µs each in the same lock: one row of 20 µs.
TEST(ReportModelTest, WaitsInOneStackAreSummedAcrossThreads) {
  ReportModel model({});
  Preamble(model, 1'000);
  const uint32_t threads[] = {kHandler, kHolder};
  for (uint32_t cpu : {0u, 1u}) {
    model.Add({.time_ns = 1'000, .tid = 0, .cpu = cpu, .payload = format::SchedSwitch{threads[cpu], 0}});
  }
  for (uint32_t cpu : {0u, 1u}) {
    model.Add({.time_ns = 2'000, .tid = threads[cpu], .cpu = cpu, .payload = format::SchedSwitch{0, 1}});
  }
  for (uint32_t cpu : {0u, 1u}) {
    model.Add({.time_ns = 12'000, .tid = 0, .cpu = cpu,
               .payload = format::SchedWakeup{.woken_tid = threads[cpu], .target_cpu = cpu}});
    model.Add({.time_ns = 12'000, .tid = 0, .cpu = cpu, .payload = format::SchedSwitch{threads[cpu], 0}});
    model.Add({.time_ns = 12'000, .tid = threads[cpu], .cpu = cpu,
               .payload = format::OffCpu{.duration_ns = 10'000, .prev_state = 1,
                                         .user_stack = kBlockedUser, .kernel_stack = kBlockedKernel}});
  }
  model.Add({.time_ns = 13'000, .tid = kHandler, .payload = format::Instant{.name = "end"}});
  model.AddSymbols(Symbols());
  model.Finish();
  const std::vector<StackShare> waits = model.TopWaits(/*inside=*/false, 10);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].wait, "lock");
  EXPECT_EQ(waits[0].ns, 20'000u);
  EXPECT_EQ(waits[0].function, "lookup_shared_cache");
}

TEST(ReportModelTest, WithoutSchedulerRecordsRequestsAreReportedAndUnaccounted) {
  ReportModel model({});
  Preamble(model, 100);
  model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::SpanBegin{.span_id = 5, .name = "handle"}});
  model.Add({.time_ns = 9'000, .tid = kHandler, .payload = format::SpanEnd{5}});
  model.Finish();
  EXPECT_FALSE(model.has_sched_data());
  const KindReport* span = KindNamed(model, "handle");
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->slow.unaccounted_ns, 8'000u);
  EXPECT_EQ(span->slow.dominant, "unaccounted");
  const std::string text = ReportText(model, {});
  const size_t said = text.find("no scheduler records");
  ASSERT_NE(said, std::string::npos) << text;
  EXPECT_EQ(text.find("no scheduler records", said + 1), std::string::npos) << "said once";
  EXPECT_EQ(text.find("times are exact"), std::string::npos) << "nor contradicted:\n" << text;
}

TEST(ReportModelTest, UnpairedBeginsAndEndsAreCountedNotLost) {
  ReportModel model({.pairs = {*ParseUsdtPair("db:query__start..query__done")}});
  Preamble(model, 100);
  model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__done"}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__start"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__done"}});
  model.Add({.time_ns = 4'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__start"}});
  model.Finish();
  const KindReport* query = KindNamed(model, "db:query");
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(query->count, 1u);
  EXPECT_EQ(query->unpaired_ends, 1u);
  EXPECT_EQ(query->unpaired_begins, 1u);
  EXPECT_NE(ReportText(model, {}).find("unpaired: 1 begun without an end, 1 ended without a begin"),
            std::string::npos);
}

// Spans that lost their ends to a full ring stay open under later ones:
// past the per-thread cap the oldest is given up, so the spans after the
// loss still pair (before, every later begin was refused as unpaired). A
// span end whose begin was lost is counted, though its kind is unknown.
TEST(ReportModelTest, SpansAfterLostEndsStillPairAndLostBeginsAreCounted) {
  ReportModel model({});
  Preamble(model, 100);
  uint64_t t = 1'000;
  for (uint64_t id = 1; id <= 100; ++id, t += 10) {  // their ends were lost
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::SpanBegin{.span_id = id, .name = "handle"}});
  }
  for (uint64_t id = 101; id <= 110; ++id, t += 100) {
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::SpanBegin{.span_id = id, .name = "handle"}});
    model.Add({.time_ns = t + 50, .tid = kHandler, .payload = format::SpanEnd{id}});
  }
  for (uint64_t id = 200; id < 203; ++id, t += 10) {  // their begins were lost
    model.Add({.time_ns = t, .tid = kHandler, .payload = format::SpanEnd{id}});
  }
  model.Finish();
  const KindReport* span = KindNamed(model, "handle");
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->count, 10u);
  EXPECT_EQ(span->max_ns, 50u);
  EXPECT_EQ(span->unpaired_begins, 100u);
  EXPECT_EQ(model.ends_without_begin(), 3u);
  EXPECT_NE(ReportText(model, {}).find("3 span or operation ends without their begin"),
            std::string::npos);
}

// Lost events of a kind's source make its pairs approximate, and the kind
// says so; a loss of another source does not touch it; cuts do not count.
TEST(ReportModelTest, AKindWhoseBeginsOrEndsMayBeLostSaysItsTimesAreApproximate) {
  ReportModel model({.pairs = {*ParseUsdtPair("db:query__start..query__done")}});
  Preamble(model, 100);
  model.Add({.time_ns = 500, .payload = format::Loss{format::LossSource::kShim,
                                                     format::LossReason::kRingFull, 5}});
  model.Add({.time_ns = 500, .payload = format::Loss{format::LossSource::kUsdt,
                                                     format::LossReason::kStringTruncated, 9}});
  model.Add({.time_ns = 1'000, .tid = kHandler, .payload = format::SpanBegin{.span_id = 5, .name = "handle"}});
  model.Add({.time_ns = 2'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__start"}});
  model.Add({.time_ns = 3'000, .tid = kHandler, .payload = format::UsdtEvent{.probe = "db:query__done"}});
  model.Add({.time_ns = 9'000, .tid = kHandler, .payload = format::SpanEnd{5}});
  model.Finish();
  const KindReport* span = KindNamed(model, "handle");
  const KindReport* query = KindNamed(model, "db:query");
  ASSERT_NE(span, nullptr);
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(span->pairing_lost, 5u);
  EXPECT_EQ(query->pairing_lost, 0u);
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("approximate: 5 events that could be its begins or ends were lost"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("approximate: 9"), std::string::npos) << text;
}

// An acceptor reads request 7 (1 µs on CPU) and passes it on; the worker,
// busy until then, takes it up 17 µs later and handles it in 1 µs. One
// request of 19 µs, from the acceptor's begin to the worker's end, most of
// it queued between them.
constexpr uint32_t kAcceptor = 21, kWorker = 22;

// Both threads running from 1 µs; request 7 begun by the acceptor at 2 µs
// and passed on at 3 µs.
void PassSeven(ReportModel& model) {
  model.Add({.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "server"}});
  model.Add({.time_ns = 1'000, .tid = kAcceptor, .payload = format::ThreadInfo{.pid = kPid, .name = "acceptor"}});
  model.Add({.time_ns = 1'000, .tid = kWorker, .payload = format::ThreadInfo{.pid = kPid, .name = "worker"}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kAcceptor, 0}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWorker, 0}});
  model.Add({.time_ns = 2'000, .tid = kAcceptor, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 3'000, .tid = kAcceptor,
             .payload = format::OperationEnd{.operation_id = 7, .passed = true}});
}

void Handoff(ReportModel& model, bool taken_up) {
  PassSeven(model);
  if (taken_up) {
    model.Add({.time_ns = 20'000, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
    model.Add({.time_ns = 21'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  }
  model.Finish();
}

TEST(ReportModelTest, AnOperationPassedBetweenThreadsIsOneRequestWithItsQueuedTime) {
  ReportModel model({});
  Handoff(model, true);
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->count, 1u);
  EXPECT_EQ(operation->max_ns, 19'000u);
  const Breakdown& slow = operation->slow;
  EXPECT_EQ(slow.duration_ns, 19'000u);
  EXPECT_EQ(slow.on_cpu_ns, 2'000u);  // 1 µs on each thread
  EXPECT_EQ(slow.queued_ns, 17'000u);
  EXPECT_EQ(slow.unaccounted_ns, 0u);
  ExpectPartsAddUp(slow);
  EXPECT_EQ(slow.dominant, "queued");
  ASSERT_EQ(slow.handoffs.size(), 1u);
  EXPECT_EQ(slow.handoffs[0].from.thread, "acceptor");
  EXPECT_EQ(slow.handoffs[0].to.thread, "worker");
  EXPECT_EQ(slow.handoffs[0].ns, 17'000u);
  EXPECT_EQ(slow.sentence,
            "slow request: 89 % queued between threads, passed on by acceptor and waiting for "
            "worker to take it up; worker's CPU time over the trace: 0.019 ms outside requests, 0.001 ms in them");

  ASSERT_EQ(model.slowest().size(), 1u);
  const RequestReport& request = model.slowest()[0];
  EXPECT_EQ(request.thread.thread, "worker");
  ASSERT_TRUE(request.passed_from.has_value());
  EXPECT_EQ(request.passed_from->thread, "acceptor");
  EXPECT_EQ(request.begin_ns, 2'000u);
  EXPECT_EQ(request.args, std::vector<int64_t>{7});
  ExpectPartsAddUp(request.breakdown);

  // Meanwhile the worker ran, outside requests, the whole 17 µs.
  EXPECT_EQ(request.breakdown.taker.outside_ns, 17'000u);
  EXPECT_EQ(request.breakdown.taker.inside_ns, 0u);
  EXPECT_EQ(request.breakdown.taker.blocked_ns, 0u);
  EXPECT_EQ(request.breakdown.taker.runq_ns, 0u);
  EXPECT_EQ(request.breakdown.taker.unknown, 0u);

  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("queued 0.017 ms after acceptor (tid 21, server) passed it on, until worker "
                      "(tid 22, server) took it up"),
            std::string::npos) << text;
  EXPECT_NE(text.find("meanwhile worker ran 0.017 ms outside requests, 0.000 ms in other requests, "
                      "was blocked 0.000 ms and waited 0.000 ms for a CPU"),
            std::string::npos) << text;
  EXPECT_NE(text.find("on worker (tid 22, server) (from acceptor (tid 21, server))"),
            std::string::npos) << text;
  const std::string json = ReportJson(model, {});
  EXPECT_NE(json.find("\"queued_ns\":17000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"passed_from\":{\"tid\":21"), std::string::npos) << json;
}

// While request 7 waits (3 → 20 µs) the worker runs 1 µs outside
// requests, handles request 8 (5 µs), sleeps 4 µs, waits 2 µs for its CPU
// after the acceptor wakes it, then runs 5 µs more
// outside requests, sampled in compact_index reading the clock through
// the vDSO: what it did instead is those parts, exactly, and the function
// is the application's.
TEST(ReportModelTest, WhatTheTakerDidWhileARequestWasQueuedIsItsOwnTimeThen) {
  constexpr uint64_t kVdsoClock = 0x7fff00000100, kCompactIndex = 0x403000;
  const uint64_t sampled[] = {kVdsoClock, kCompactIndex};
  ReportModel model({});
  PassSeven(model);
  model.Add({.time_ns = 4'000, .tid = kWorker, .payload = format::OperationBegin{8, "request"}});
  model.Add({.time_ns = 9'000, .tid = kWorker, .payload = format::OperationEnd{8}});
  model.Add({.time_ns = 9'000, .tid = kWorker, .cpu = 1, .payload = format::SchedSwitch{0, 1}});
  model.Add({.time_ns = 13'000, .tid = kAcceptor, .cpu = 0,
             .payload = format::SchedWakeup{.woken_tid = kWorker, .target_cpu = 1}});
  model.Add({.time_ns = 15'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWorker, 0}});
  model.Add({.time_ns = 17'000, .tid = kWorker, .cpu = 1,
             .payload = format::CpuSample{.user_stack = sampled}});
  model.Add({.time_ns = 20'000, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 21'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  v1::SymbolTable symbols;
  for (const char* path : {"[vdso]", "/srv/server"}) {
    auto* mapping = symbols.add_mappings();
    mapping->set_pid(kPid);
    mapping->set_path(path);
  }
  for (auto [address, mapping, function] : {std::tuple{kVdsoClock, 1u, "__vdso_clock_gettime"},
                                            std::tuple{kCompactIndex, 2u, "compact_index"}}) {
    auto* entry = symbols.add_addresses();
    entry->set_pid(kPid);
    entry->set_address(address);
    entry->set_mapping(mapping);
    entry->add_frames()->set_function(function);
  }
  model.AddSymbols(symbols);
  model.Finish();

  const RequestReport* seven = nullptr;
  for (const RequestReport& request : model.slowest()) {
    if (request.args == std::vector<int64_t>{7}) seven = &request;
  }
  ASSERT_NE(seven, nullptr);
  const Breakdown& b = seven->breakdown;
  EXPECT_EQ(b.queued_ns, 17'000u);
  EXPECT_EQ(b.taker.outside_ns, 6'000u);
  EXPECT_EQ(b.taker.inside_ns, 5'000u);
  EXPECT_EQ(b.taker.blocked_ns, 4'000u);
  EXPECT_EQ(b.taker.runq_ns, 2'000u);
  EXPECT_EQ(b.taker.outside_ns + b.taker.inside_ns + b.taker.blocked_ns + b.taker.runq_ns,
            b.queued_ns);
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("meanwhile worker ran 0.006 ms outside requests (mostly in compact_index, "
                      "sampled), 0.005 ms in other requests, was blocked 0.004 ms and waited "
                      "0.002 ms for a CPU"),
            std::string::npos) << text;
  const std::string json = ReportJson(model, {});
  EXPECT_NE(json.find("\"taker_while_queued\":{\"outside_requests_ns\":6000,\"in_other_requests_ns\":5000,"
                      "\"off_cpu_ns\":6000,\"blocked_ns\":4000,\"runqueue_ns\":2000,\"unplaced_ns\":0,"
                      "\"function\":\"compact_index\",\"known\":true}"),
            std::string::npos) << json;
}

// The worker switches 300 times while the request waits: more than the
// history it keeps, so what it did then is said to be unknown, not guessed.
TEST(ReportModelTest, ATakerWhoseHistoryDoesNotReachThePassIsUnknown) {
  ReportModel model({});
  PassSeven(model);
  uint64_t t = 4'000;
  for (int i = 0; i < 300; ++i, t += 2'000) {
    model.Add({.time_ns = t, .tid = kWorker, .cpu = 1, .payload = format::SchedSwitch{0, 1}});
    model.Add({.time_ns = t + 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWorker, 0}});
  }
  model.Add({.time_ns = t, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = t + 1'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  model.Finish();

  ASSERT_EQ(model.slowest().size(), 1u);
  EXPECT_EQ(model.slowest()[0].breakdown.taker.unknown, 1u);
  const std::string text = ReportText(model, {});
  EXPECT_NE(text.find("meanwhile worker: not known"), std::string::npos) << text;
  EXPECT_NE(ReportJson(model, {}).find("\"known\":false"), std::string::npos);
}

// Without scheduler records nothing says what the worker did meanwhile:
// no line claims it, and JSON says all of it is unplaced.
TEST(ReportModelTest, WithoutSchedulerRecordsTheTakerIsNotDescribed) {
  ReportModel model({});
  model.Add({.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "server"}});
  model.Add({.time_ns = 2'000, .tid = kAcceptor, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 3'000, .tid = kAcceptor,
             .payload = format::OperationEnd{.operation_id = 7, .passed = true}});
  model.Add({.time_ns = 20'000, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 21'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  model.Finish();
  ASSERT_EQ(model.slowest().size(), 1u);
  EXPECT_EQ(model.slowest()[0].breakdown.taker.unplaced_ns, 17'000u);
  const std::string text = ReportText(model, {});
  EXPECT_EQ(text.find("meanwhile"), std::string::npos) << text;
}

// Passed on and never taken up: no duration to report, and said so.
TEST(ReportModelTest, AnOperationPassedOnAndNeverTakenUpIsCountedNotTimed) {
  ReportModel model({});
  Handoff(model, false);
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->count, 0u);
  EXPECT_EQ(operation->passed_not_taken, 1u);
  EXPECT_EQ(operation->unpaired_begins, 0u);
  EXPECT_NE(ReportText(model, {}).find("1 passed on to another thread and not taken up"),
            std::string::npos);
}

// Begun inside --until, taken up after it: still one whole request.
TEST(ReportModelTest, ATakeUpPastTheWindowStillEndsTheRequest) {
  ReportModel model({.until_ns = 10'000});  // from the first event, at 1 µs
  Handoff(model, true);
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->count, 1u);
  EXPECT_EQ(operation->passed_not_taken, 0u);
  EXPECT_EQ(operation->slow.queued_ns, 17'000u);
}

// The take-up's begin was lost: its end finds the pass waiting, which goes
// (counted), so that a later request reusing the id is not joined to it.
TEST(ReportModelTest, AnEndWithoutItsTakeUpDropsThePass) {
  ReportModel model({});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kAcceptor, 0}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWorker, 0}});
  model.Add({.time_ns = 2'000, .tid = kAcceptor, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 3'000, .tid = kAcceptor,
             .payload = format::OperationEnd{.operation_id = 7, .passed = true}});
  model.Add({.time_ns = 21'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  model.Add({.time_ns = 90'000, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 91'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  model.Finish();
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->passed_not_taken, 1u);
  EXPECT_EQ(operation->count, 1u);
  EXPECT_EQ(operation->max_ns, 1'000u);
  EXPECT_EQ(operation->slow.queued_ns, 0u);
}

// Without a pass, the same id bound on two threads is two requests: ids are
// often reused (a connection's fd), and nothing says the two are one.
TEST(ReportModelTest, AnIdBoundOnTwoThreadsWithoutAPassIsTwoRequests) {
  ReportModel model({});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 0, .payload = format::SchedSwitch{kAcceptor, 0}});
  model.Add({.time_ns = 1'000, .tid = 0, .cpu = 1, .payload = format::SchedSwitch{kWorker, 0}});
  model.Add({.time_ns = 2'000, .tid = kAcceptor, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 3'000, .tid = kAcceptor, .payload = format::OperationEnd{7}});
  model.Add({.time_ns = 20'000, .tid = kWorker, .payload = format::OperationBegin{7, "request"}});
  model.Add({.time_ns = 21'000, .tid = kWorker, .payload = format::OperationEnd{7}});
  model.Finish();
  const KindReport* operation = KindNamed(model, "request");
  ASSERT_NE(operation, nullptr);
  EXPECT_EQ(operation->count, 2u);
  EXPECT_EQ(operation->max_ns, 1'000u);
  EXPECT_EQ(operation->slow.queued_ns, 0u);
}

}  // namespace
}  // namespace loupe::analysis
