// User stacks unwound on real processes built with frame pointers and
// without (tests/testprogs/unwind_app.c): CPU samples and off-CPU stacks keep
// their callers through Debian's libc (no frame pointers), through a stripped
// library (only .eh_frame), through a signal frame into the interrupted code,
// past the trampoline a %return probe puts in place of a return address,
// through a library loaded with dlopen after attach once its tables are
// loaded (before that the leaf alone, counted as a cut); a stack deeper than
// the cap is a cut, not a loss; a thread's exit is no cut; no user frame is junk and no off-CPU kernel
// stack begins in the tracer. Where code is and which threads exist is read
// from /proc, not from the trace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string_view>

#include "daemon/format/loss_tally.h"
#include "daemon/format/record.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/session.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/quiet_log.h"
#include "tests/support/symbolized_trace.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_digest.h"

namespace loupe::session {
namespace {

using testing::ChildProcess;
using testing::NamedFrame;
using testing::SymbolizedStack;
using testing::TestProgram;

struct Mapping {
  uint64_t start = 0, end = 0;
  std::string path;
};

// The executable mappings of `pid` (the vDSO among them).
std::vector<Mapping> CodeMappings(pid_t pid) {
  std::vector<Mapping> code;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, device, inode, path;
    in >> range >> perms >> offset >> device >> inode >> path;
    if (perms.size() < 3 || perms[2] != 'x') continue;
    const size_t dash = range.find('-');
    code.push_back({std::stoull(range.substr(0, dash), nullptr, 16),
                    std::stoull(range.substr(dash + 1), nullptr, 16), path});
  }
  return code;
}

std::vector<uint32_t> Threads(pid_t pid) {
  std::vector<uint32_t> tids;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    tids.push_back(static_cast<uint32_t>(std::stoul(entry.path().filename().string())));
  }
  return tids;
}

struct UnwindRun {
  pid_t pid = 0;
  std::vector<uint32_t> threads;
  std::vector<Mapping> code;
  testing::SymbolizedTrace trace;
  testing::TraceDigest digest;
};

// Traces `unwind_app_<variant> <mode>` from its "ready" for about 1.5 s:
// CPU samples at 999 Hz, off-CPU intervals with user and kernel stacks.
// `traced`, if given, runs once tracing has begun (and before the 1.5 s);
// `uprobes` are probe specs (tracectl's --uprobe) traced as well.
UnwindRun TraceApp(const std::string& variant, const std::string& mode, const testing::TempDir& dir,
                   const std::function<void(ChildProcess&)>& traced = nullptr,
                   const std::vector<std::string>& uprobes = {}) {
  UnwindRun run;
  ChildProcess program({TestProgram("unwind_app_" + variant), mode});
  const std::string ready = program.ReadLine();
  EXPECT_EQ(ready, "ready");
  if (ready != "ready") return run;
  run.pid = program.pid();
  SessionOptions options;
  options.pids = {static_cast<uint32_t>(program.pid())};
  options.writer.directory = dir.path();
  options.writer.session_id = "unwind";
  options.sources.sample_hz = 999;
  const absl::Status probes = probes::ParseProbeRequests({}, uprobes, &options.probes);
  EXPECT_TRUE(probes.ok()) << probes;
  auto session = Session::Start(std::move(options), testing::QuietLog());
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return run;
  if (traced) traced(program);
  usleep(1'500'000);
  EXPECT_TRUE((*session)->Stop().ok());
  // Still alive: it runs until killed, when `program` goes.
  run.threads = Threads(run.pid);
  run.code = CodeMappings(run.pid);
  run.trace = testing::Symbolize(dir.path());
  run.digest = testing::DigestTrace(dir.path());
  EXPECT_TRUE(run.trace.readable);
  return run;
}

using FrameTest = std::function<bool(const NamedFrame&)>;

FrameTest Is(std::string name) {
  return [name = std::move(name)](const NamedFrame& frame) { return frame.function == name; };
}

FrameTest Contains(std::vector<std::string> parts) {
  return [parts = std::move(parts)](const NamedFrame& frame) {
    return std::any_of(parts.begin(), parts.end(), [&](const std::string& part) {
      return frame.function.find(part) != std::string::npos;
    });
  };
}

// glibc's names for read(2)'s wrapper: read, __libc_read, __GI___libc_read, ...
bool IsLibcRead(const NamedFrame& frame) {
  std::string_view name = frame.function;
  for (std::string_view prefix : {"__", "GI_", "__", "libc_"}) {
    if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  }
  return name == "read" || name == "read_nocancel";
}

// True if the frames (innermost first), read from the root towards the
// leaf, hold frames passing `chain` in that order, other frames allowed
// between them.
bool ReadsRootToLeaf(const std::vector<NamedFrame>& frames, const std::vector<FrameTest>& chain) {
  size_t next = 0;
  for (auto frame = frames.rbegin(); frame != frames.rend() && next < chain.size(); ++frame) {
    next += chain[next](*frame);
  }
  return next == chain.size();
}

bool Reaches(const std::vector<NamedFrame>& frames, const std::string& name) {
  return std::any_of(frames.begin(), frames.end(), Is(name));
}

// The function the leaf address is in, past the frames inlined into it.
std::string LeafFunction(const std::vector<NamedFrame>& frames) {
  auto leaf = std::find_if(frames.begin(), frames.end(),
                           [](const NamedFrame& frame) { return !frame.inlined; });
  return leaf == frames.end() ? "" : leaf->function;
}

// Leaf first; a run of one function as "recurse x126".
std::string Show(const std::vector<NamedFrame>& frames) {
  std::string shown;
  for (size_t i = 0; i < frames.size();) {
    size_t run = 1;
    while (i + run < frames.size() && frames[i + run].function == frames[i].function &&
           frames[i + run].inlined == frames[i].inlined) {
      ++run;
    }
    shown += (shown.empty() ? "" : " <- ") + frames[i].function + (frames[i].inlined ? "(i)" : "");
    if (run > 1) shown += " x" + std::to_string(run);
    i += run;
  }
  return shown;
}

// The `n` commonest of `stacks`' user stacks, with their counts.
std::string ShowSome(const std::vector<const SymbolizedStack*>& stacks, size_t n = 6) {
  std::map<std::string, size_t> counts;
  for (const SymbolizedStack* stack : stacks) ++counts[Show(stack->user_frames)];
  std::vector<std::pair<size_t, std::string>> commonest;
  for (const auto& [shown, count] : counts) commonest.emplace_back(count, shown);
  std::sort(commonest.rbegin(), commonest.rend());
  std::string shown;
  for (size_t i = 0; i < std::min(n, commonest.size()); ++i) {
    shown += "\n  " + std::to_string(commonest[i].first) + "x  " + commonest[i].second;
  }
  return shown;
}

std::vector<const SymbolizedStack*> All(const std::vector<SymbolizedStack>& stacks) {
  std::vector<const SymbolizedStack*> all;
  for (const SymbolizedStack& stack : stacks) all.push_back(&stack);
  return all;
}

std::vector<const SymbolizedStack*> Matching(const std::vector<SymbolizedStack>& stacks,
                                             const std::vector<FrameTest>& chain) {
  std::vector<const SymbolizedStack*> matching;
  for (const SymbolizedStack& stack : stacks) {
    if (ReadsRootToLeaf(stack.user_frames, chain)) matching.push_back(&stack);
  }
  return matching;
}

// What must hold of every stack of every case: user frames are addresses
// of the target's code, and off-CPU kernel stacks begin where the thread
// went off the CPU, not in the tracer that recorded it.
void ExpectSaneStacks(const UnwindRun& run) {
  ASSERT_FALSE(run.code.empty());
  auto in_code = [&](uint64_t address) {
    return std::any_of(run.code.begin(), run.code.end(),
                       [&](const Mapping& m) { return address >= m.start && address < m.end; });
  };
  std::vector<const SymbolizedStack*> junk;
  uint64_t junk_frames = 0, frames = 0;
  std::string first_junk;
  for (const auto* stacks : {&run.trace.samples, &run.trace.off_cpu}) {
    for (const SymbolizedStack& stack : *stacks) {
      bool bad = false;
      for (size_t i = 0; i < stack.user.size(); ++i) {
        const uint64_t address = stack.user[i];
        ++frames;
        // Below 4096 is never mapped; past 2^47 is not a canonical user address.
        if (address >= 4096 && address < (1ull << 47) && in_code(address)) continue;
        // A walk that stopped says so in its outermost frame, and only there.
        if (address == format::kUnwindStoppedFrame && i + 1 == stack.user.size()) continue;
        ++junk_frames;
        if (first_junk.empty()) {
          std::ostringstream text;
          text << "0x" << std::hex << address;
          first_junk = text.str();
        }
        bad = true;
      }
      if (bad) junk.push_back(&stack);
    }
  }
  EXPECT_EQ(junk_frames, 0u) << junk_frames << " of " << frames << " user frames in " << junk.size()
                             << " stacks are not code of the target (first " << first_junk
                             << "):" << ShowSome(junk);

  std::vector<std::string> tracer;
  for (const SymbolizedStack& stack : run.trace.off_cpu) {
    if (stack.kernel_frames.empty()) continue;
    const bool starts_in_tracer = stack.kernel_frames.front().function.starts_with("__traceiter_");
    const bool through_bpf = std::any_of(
        stack.kernel_frames.begin(), stack.kernel_frames.end(), [](const NamedFrame& frame) {
          return frame.function.starts_with("bpf_") || frame.function.starts_with("__bpf_");
        });
    if (starts_in_tracer || through_bpf) tracer.push_back(Show(stack.kernel_frames));
  }
  EXPECT_TRUE(tracer.empty()) << tracer.size() << " of " << run.trace.off_cpu.size()
                              << " off-CPU kernel stacks hold the tracer's frames, e.g. "
                              << tracer.front();
}

class UnwindTest : public ::testing::TestWithParam<std::string> {
 protected:
  UnwindRun Trace(const std::string& mode,
                  const std::function<void(ChildProcess&)>& traced = nullptr,
                  const std::vector<std::string>& uprobes = {}) {
    return TraceApp(GetParam(), mode, dir_, traced, uprobes);
  }

 private:
  testing::TempDir dir_;
};

TEST_P(UnwindTest, CpuSamplesReachMainThroughLibc) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("cpu");
  const auto& samples = run.trace.samples;
  ASSERT_GE(samples.size(), 300u) << "too few samples to judge";
  std::vector<const SymbolizedStack*> short_of_root;
  for (const SymbolizedStack& stack : samples) {
    if (!Reaches(stack.user_frames, "main") && !Reaches(stack.user_frames, "start_thread")) {
      short_of_root.push_back(&stack);
    }
  }
  EXPECT_LE(short_of_root.size() * 100, samples.size() * 5)
      << short_of_root.size() << " of " << samples.size()
      << " user stacks reach neither main nor start_thread:" << ShowSome(short_of_root);

  const auto sorting =
      Matching(samples, {Is("main"), Is("sort_it"), Contains({"qsort"}), Is("cmp")});
  EXPECT_FALSE(sorting.empty()) << "no stack reads main, sort_it, qsort..., cmp; some are:"
                                << ShowSome(All(samples));
  const auto copying = Matching(samples, {Is("copy_it"), Contains({"memcpy", "memmove"})});
  EXPECT_FALSE(copying.empty()) << "no stack reads copy_it, memcpy; some are:"
                                << ShowSome(All(samples));
  const auto allocating = Matching(samples, {Is("alloc_it"), Contains({"malloc", "free"})});
  EXPECT_FALSE(allocating.empty())
      << "no stack reads alloc_it, malloc or free; some are:" << ShowSome(All(samples));
  ExpectSaneStacks(run);
}

// A %return probe puts the kernel's trampoline in place of the probed
// call's return address until it returns: stacks taken inside sort_it,
// copy_it and alloc_it go on past it to main all the same. Samples that
// find the thread in the [uprobes] page itself (stepping a probed
// instruction's copy, or in the return trampoline) were 3-5 % of them
// with the CPUs busy; what is left (< 1 %) are the kernel's own windows
// where the pending return is neither on the list nor in rip.
TEST_P(UnwindTest, StacksInsideReturnProbedCallsReachTheirCallers) {
  LOUPE_REQUIRE_PRIVILEGES();
  const std::string program = "unwind_app_" + GetParam();
  const UnwindRun run = Trace("cpu", nullptr,
                              {program + ":sort_it%return", program + ":copy_it%return",
                               program + ":alloc_it%return"});
  const auto& samples = run.trace.samples;
  ASSERT_GE(samples.size(), 300u) << "too few samples to judge";
  std::vector<const SymbolizedStack*> short_of_main;
  for (const SymbolizedStack& stack : samples) {
    if (!Reaches(stack.user_frames, "main")) short_of_main.push_back(&stack);
  }
  EXPECT_LE(short_of_main.size() * 500, samples.size())
      << short_of_main.size() << " of " << samples.size()
      << " user stacks do not reach main:" << ShowSome(short_of_main);
  EXPECT_FALSE(Matching(samples, {Is("main"), Is("sort_it"), Contains({"qsort"}), Is("cmp")}).empty())
      << "no stack reads main, sort_it, qsort..., cmp; some are:" << ShowSome(All(samples));
  ExpectSaneStacks(run);
}

// Twelve levels of a recursion traced with %return: every level's return
// address is the trampoline, each put back from its own pending return.
// The return probe is on nest's last byte (its ret): a sample on the
// trap's way back, before the kernel rewinds pc onto it, found pc past the
// function and the walk stopped there (5-20 of ~1600 stacks before).
TEST_P(UnwindTest, StacksInsideNestedReturnProbedCallsReachMain) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("nested", nullptr, {"unwind_app_" + GetParam() + ":nest%return"});
  const auto& samples = run.trace.samples;
  ASSERT_GE(samples.size(), 300u) << "too few samples to judge";
  std::vector<const SymbolizedStack*> short_of_main;
  size_t thirteen_deep = 0;
  for (const SymbolizedStack& stack : samples) {
    if (!Reaches(stack.user_frames, "main")) short_of_main.push_back(&stack);
    const auto nests = std::count_if(stack.user_frames.begin(), stack.user_frames.end(),
                                     [](const NamedFrame& frame) { return frame.function == "nest"; });
    if (nests == 13) ++thirteen_deep;
  }
  EXPECT_LE(short_of_main.size() * 500, samples.size())
      << short_of_main.size() << " of " << samples.size()
      << " user stacks do not reach main:" << ShowSome(short_of_main);
  EXPECT_GE(thirteen_deep * 2, samples.size()) << "few stacks hold all 13 levels:"
                                               << ShowSome(All(samples));
  ExpectSaneStacks(run);
}

// The off-CPU intervals of the program's one blocked thread (poked by main
// every 10 ms, so that they end and are written) keep `chain`.
void ExpectBlockedThreadKeeps(const UnwindRun& run, const std::vector<FrameTest>& chain,
                              const std::string& what) {
  ASSERT_EQ(run.threads.size(), 2u);
  const uint32_t blocked =
      run.threads[0] == static_cast<uint32_t>(run.pid) ? run.threads[1] : run.threads[0];
  std::vector<const SymbolizedStack*> intervals, broken;
  for (const SymbolizedStack& stack : run.trace.off_cpu) {
    if (stack.tid != blocked) continue;
    intervals.push_back(&stack);
    if (!ReadsRootToLeaf(stack.user_frames, chain)) broken.push_back(&stack);
  }
  ASSERT_GE(intervals.size(), 10u) << "too few off-CPU intervals of the blocked thread";
  // A poke may find it between its wakeup and its next wait.
  EXPECT_LE(broken.size() * 10, intervals.size())
      << broken.size() << " of " << intervals.size() << " off-CPU stacks do not read " << what
      << ":" << ShowSome(broken);
}

TEST_P(UnwindTest, ThreadBlockedOnAMutexKeepsItsCallers) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("mutex");
  ExpectBlockedThreadKeeps(
      run, {Is("start_thread"), Is("wait_for_lock"), Contains({"mutex_lock", "lll_lock"})},
      "start_thread, wait_for_lock, pthread_mutex_lock");
  ExpectSaneStacks(run);
}

TEST_P(UnwindTest, ThreadBlockedInReadKeepsItsCallers) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("read");
  ExpectBlockedThreadKeeps(run, {Is("start_thread"), Is("wait_for_input"), IsLibcRead},
                           "start_thread, wait_for_input, read");
  ExpectSaneStacks(run);
}

// Both threads sleep through the whole trace: neither switches while
// traced, so no BPF program ever ran on them, yet each one's wait in the
// trace keeps its callers, walked from user space when tracing stops.
TEST_P(UnwindTest, ThreadsAsleepThroughTheTraceKeepTheirCallers) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("hung");
  ASSERT_EQ(run.threads.size(), 2u);
  std::map<uint32_t, std::vector<const SymbolizedStack*>> waits;
  for (const SymbolizedStack& stack : run.trace.off_cpu) waits[stack.tid].push_back(&stack);
  const uint32_t main_thread = static_cast<uint32_t>(run.pid);
  const uint32_t blocked = run.threads[0] == main_thread ? run.threads[1] : run.threads[0];
  ASSERT_EQ(waits[blocked].size(), 1u) << "one wait, the whole trace";
  ASSERT_EQ(waits[main_thread].size(), 1u) << "one wait, the whole trace";
  const SymbolizedStack& locking = *waits[blocked][0];
  EXPECT_TRUE(ReadsRootToLeaf(locking.user_frames, {Is("start_thread"), Is("wait_for_lock"),
                                                     Contains({"mutex_lock", "lll_lock"})}))
      << ShowSome({&locking});
  ASSERT_FALSE(locking.user.empty());
  EXPECT_NE(locking.user.back(), format::kUnwindStoppedFrame) << ShowSome({&locking});
  const SymbolizedStack& joining = *waits[main_thread][0];
  EXPECT_TRUE(ReadsRootToLeaf(joining.user_frames,
                              {Is("main"), Is("join_blocked"), Contains({"pthread_join", "join"})}))
      << ShowSome({&joining});
  ExpectSaneStacks(run);
}

// Threads asleep when tracing begins and woken during it: the wait their
// first switch-in ends has the stacks read right after recording began,
// as a switch-out in the trace would have given it.
TEST_P(UnwindTest, ThreadsAsleepWhenTracingBeginsKeepTheirCallersWhenWoken) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("released", [](ChildProcess& program) {
    usleep(300'000);
    program.WriteLine("go");
  });
  uint64_t trace_end_ns = 0;
  for (const SymbolizedStack& stack : run.trace.off_cpu) {
    trace_end_ns = std::max(trace_end_ns, stack.time_ns);
  }
  auto woken_during_the_trace = [&](const SymbolizedStack& wait) {
    return wait.duration_ns >= 250'000'000 && wait.time_ns + 500'000'000 <= trace_end_ns;
  };
  std::vector<const SymbolizedStack*> locking, reading;
  for (const SymbolizedStack& wait : run.trace.off_cpu) {
    if (ReadsRootToLeaf(wait.user_frames, {Is("start_thread"), Is("wait_for_lock"),
                                           Contains({"mutex_lock", "lll_lock"})})) {
      locking.push_back(&wait);
    }
    if (ReadsRootToLeaf(wait.user_frames, {Is("main"), Is("run_released"), Is("wait_for_word")})) {
      reading.push_back(&wait);
    }
  }
  // Each of them waited there once from the start: its longest wait.
  for (const auto* waits : {&locking, &reading}) {
    ASSERT_FALSE(waits->empty()) << ShowSome(All(run.trace.off_cpu));
    const SymbolizedStack& longest = **std::max_element(
        waits->begin(), waits->end(),
        [](const auto* a, const auto* b) { return a->duration_ns < b->duration_ns; });
    EXPECT_TRUE(woken_during_the_trace(longest))
        << longest.duration_ns << " ns ending at " << longest.time_ns << ", the trace at "
        << trace_end_ns << ShowSome({&longest});
  }
  ExpectSaneStacks(run);
}

TEST_P(UnwindTest, SignalHandlerStacksGoOnIntoTheInterruptedCode) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("signal");
  const auto& samples = run.trace.samples;
  std::vector<const SymbolizedStack*> in_handler;
  for (const SymbolizedStack& stack : samples) {
    if (LeafFunction(stack.user_frames) == "handler_work") {
      in_handler.push_back(&stack);
    }
  }
  ASSERT_GE(in_handler.size(), 20u) << "too few samples in the handler to judge";
  const auto through =
      Matching(samples, {Is("main"), Is("interrupted_here"), Is("on_signal"), Is("handler_work")});
  EXPECT_FALSE(through.empty()) << "of " << in_handler.size()
                                << " samples in handler_work none reads main, interrupted_here, "
                                   "on_signal, handler_work:"
                                << ShowSome(in_handler);
  ExpectSaneStacks(run);
}

TEST_P(UnwindTest, StackDeeperThanTheCapIsACutNotALoss) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("recurse");
  const auto& samples = run.trace.samples;
  ASSERT_GE(samples.size(), 300u) << "too few samples to judge";
  // 1000 frames of recurse: every sample's stack is cut at the same depth.
  std::map<size_t, size_t> by_depth;
  std::vector<const SymbolizedStack*> not_recurse;
  for (const SymbolizedStack& stack : samples) {
    ++by_depth[stack.user.size()];
    const bool only_recurse = !stack.user_frames.empty() &&
                              std::all_of(stack.user_frames.begin(), stack.user_frames.end(),
                                          [](const NamedFrame& frame) {
                                            return frame.inlined || frame.function == "recurse";
                                          });
    if (!only_recurse) not_recurse.push_back(&stack);
  }
  const auto cap = std::max_element(by_depth.begin(), by_depth.end(),
                                    [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_GE(cap->first, 32u) << "the common depth is " << cap->first;
  EXPECT_GE(cap->second * 100, samples.size() * 95)
      << "only " << cap->second << " of " << samples.size() << " stacks are " << cap->first
      << " deep";
  EXPECT_LE(not_recurse.size() * 100, samples.size() * 5)
      << not_recurse.size() << " of " << samples.size()
      << " stacks hold something other than recurse:" << ShowSome(not_recurse);

  const auto& losses = run.digest.losses;
  auto count = [&](const std::string& key) { return losses.contains(key) ? losses.at(key) : 0; };
  const uint64_t cut = count("cpu_sample/stack_truncated") + count("cpu_sample/unwind_stopped");
  EXPECT_GE(cut, cap->second) << "cut stacks not counted as cuts: "
                              << testing::WhyIncomplete(run.digest);
  for (const auto& [what, n] : losses) {
    EXPECT_TRUE(format::IsCutKey(what)) << "lost " << n << " " << what;
  }
  EXPECT_TRUE(run.digest.complete) << testing::WhyIncomplete(run.digest);
  ExpectSaneStacks(run);
}

// A thread's last switch and the samples of its exit come after it let go
// of its address space: nothing is left to walk, which is no cut. Before,
// every ending thread counted one. What stays cut is a thread inside
// clone3 (glibc gives the instruction after its system call no CFI) and a
// new thread before its first return to user mode.
TEST_P(UnwindTest, ThreadsThatEndLeaveNoCutStacks) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("threads");
  const auto in_thread = Matching(run.trace.samples, {Is("start_thread"), Is("short_lived")});
  EXPECT_GE(in_thread.size(), 100u) << "too few samples in short_lived threads; some are:"
                                    << ShowSome(All(run.trace.samples));
  auto count = [&](const std::map<std::string, uint64_t>& counts, const std::string& key) {
    return counts.contains(key) ? counts.at(key) : 0;
  };
  const uint64_t exits = count(run.digest.kinds, "thread_exit");
  ASSERT_GE(exits, 200u) << "too few threads ended to judge";
  // One per ended thread before; clone3's share grows with the machine's
  // load (a parent preempted there), so the bound leaves room for it. CPU
  // samples in clone3 are cut too, as many as the load puts there: not
  // bounded here.
  const uint64_t cut_switches = count(run.digest.losses, "sched/unwind_stopped");
  EXPECT_LE(cut_switches * 4, exits) << cut_switches << " switch stacks cut, " << exits
                                     << " threads ended";
  EXPECT_TRUE(run.digest.complete) << testing::WhyIncomplete(run.digest);
  ExpectSaneStacks(run);
}

TEST_P(UnwindTest, StrippedLibraryIsWalkedThroughWithItsCfi) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("lib");
  std::vector<Mapping> library;
  for (const Mapping& m : run.code) {
    if (m.path.ends_with("/libunwind_stripped.so")) library.push_back(m);
  }
  ASSERT_FALSE(library.empty()) << "libunwind_stripped.so is not mapped";
  auto in_library = [&](const NamedFrame& frame) {
    return std::any_of(library.begin(), library.end(), [&](const Mapping& m) {
      return frame.address >= m.start && frame.address < m.end;
    });
  };
  const auto& samples = run.trace.samples;
  std::vector<const SymbolizedStack*> in_callback;
  for (const SymbolizedStack& stack : samples) {
    if (LeafFunction(stack.user_frames) == "app_callback") {
      in_callback.push_back(&stack);
    }
  }
  ASSERT_GE(in_callback.size(), 20u) << "too few samples in app_callback to judge";
  const auto through =
      Matching(samples, {Is("main"), Is("call_lib"), in_library, Is("app_callback")});
  EXPECT_FALSE(through.empty()) << "of " << in_callback.size()
                                << " samples in app_callback none reads main, call_lib, "
                                   "libunwind_stripped.so, app_callback:"
                                << ShowSome(in_callback);
  ExpectSaneStacks(run);
}

// louped reloads a process's tables when its code changes (here a new
// page of code every 5 ms, about ten reloads a second). A reload removed
// every mapping of the process before it read /proc/PID/maps and wrote
// them back: a walk in between found none and stopped at its leaf, on
// threads whose code never changed (redis-server: 49 switch-outs cut in
// epoll_wait while uprobes were placed). The thread that keeps to its code
// loses no frame.
TEST_P(UnwindTest, ReloadingAProcesssTablesCutsNoStackOfUnchangedCode) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("remap");
  std::vector<const SymbolizedStack*> on_main, cut;
  for (const SymbolizedStack& stack : run.trace.samples) {
    if (stack.tid != static_cast<uint32_t>(run.pid)) continue;
    on_main.push_back(&stack);
    if (!stack.user.empty() && stack.user.back() == format::kUnwindStoppedFrame) cut.push_back(&stack);
  }
  ASSERT_GE(on_main.size(), 300u) << "too few samples of the main thread to judge";
  EXPECT_TRUE(cut.empty()) << cut.size() << " of " << on_main.size()
                           << " samples of the main thread cut short:" << ShowSome(cut);
  ExpectSaneStacks(run);
}

// A library loaded with dlopen after the tables were loaded: a sample whose
// leaf is in it, or whose walk reaches it, keeps its leaf and is marked cut
// until louped has loaded the process's tables again (a request from BPF,
// served at once: the app waits 300 ms past attach, longer than the reload
// interval); from then on stacks go through it to main.
TEST_P(UnwindTest, LibraryLoadedAfterAttachIsWalkedOnceItsTablesAreLoaded) {
  LOUPE_REQUIRE_PRIVILEGES();
  const UnwindRun run = Trace("dlopen", [](ChildProcess& program) {
    program.WriteLine("go");
    EXPECT_EQ(program.ReadLine(), "loaded");  // 300 ms after "go"
    usleep(500'000);                          // 2 s of samples after dlopen in all
  });
  std::vector<Mapping> plugin;
  for (const Mapping& m : run.code) {
    if (m.path.ends_with("/libunwind_plugin.so")) plugin.push_back(m);
  }
  ASSERT_FALSE(plugin.empty()) << "libunwind_plugin.so is not mapped";
  auto in_plugin = [&](const NamedFrame& frame) {
    return std::any_of(plugin.begin(), plugin.end(), [&](const Mapping& m) {
      return frame.address >= m.start && frame.address < m.end;
    });
  };
  const auto& samples = run.trace.samples;
  // Where the program spends its time once the plugin is loaded: in
  // app_callback (called only by the plugin) or in the plugin itself.
  std::vector<const SymbolizedStack*> in_chain, short_of_main, empty;
  for (const SymbolizedStack& stack : samples) {
    if (stack.user.empty()) empty.push_back(&stack);
    const auto leaf = std::find_if(stack.user_frames.begin(), stack.user_frames.end(),
                                   [](const NamedFrame& frame) { return !frame.inlined; });
    if (leaf == stack.user_frames.end()) continue;
    if (leaf->function != "app_callback" && !in_plugin(*leaf)) continue;
    in_chain.push_back(&stack);
    if (!Reaches(stack.user_frames, "main")) short_of_main.push_back(&stack);
  }
  ASSERT_GE(in_chain.size(), 500u)
      << "too few samples in the plugin's callback chain to judge:" << ShowSome(All(samples));
  EXPECT_LE(short_of_main.size() * 10, in_chain.size())
      << short_of_main.size() << " of " << in_chain.size()
      << " samples in the plugin's callback chain do not reach main:" << ShowSome(short_of_main);
  const auto through = Matching(
      samples, {Is("main"), Is("call_plugin"), Is("plugin_work"), in_plugin, Is("app_callback")});
  EXPECT_FALSE(through.empty()) << "no stack reads main, call_plugin, plugin_work, "
                                   "plugin_step, app_callback:"
                                << ShowSome(in_chain);
  // A stack cut short is counted as a cut, and no sample loses its leaf.
  EXPECT_TRUE(empty.empty()) << empty.size() << " of " << samples.size()
                             << " CPU samples have no user frame";
  const auto& losses = run.digest.losses;
  auto count = [&](const std::string& key) { return losses.contains(key) ? losses.at(key) : 0; };
  const uint64_t cut = count("cpu_sample/stack_truncated") + count("cpu_sample/unwind_stopped");
  std::cout << short_of_main.size() << " of " << in_chain.size()
            << " samples in the callback chain short of main, " << cut << " cut\n";
  EXPECT_GE(cut, short_of_main.size())
      << "stacks cut short not counted as cuts: " << testing::WhyIncomplete(run.digest);
  // ... and each says so itself, in its outermost frame: read, it is no
  // whole stack of a callback called from nowhere.
  for (const SymbolizedStack* stack : short_of_main) {
    EXPECT_EQ(stack->user.back(), format::kUnwindStoppedFrame) << ShowSome({stack});
  }
  for (const auto& [what, n] : losses) {
    EXPECT_TRUE(format::IsCutKey(what)) << "lost " << n << " " << what;
  }
  EXPECT_TRUE(run.digest.complete) << testing::WhyIncomplete(run.digest);
  ExpectSaneStacks(run);
}

INSTANTIATE_TEST_SUITE_P(Builds, UnwindTest, ::testing::Values("fp", "nofp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace loupe::session
