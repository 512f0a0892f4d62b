// Does `tracectl report` explain slow requests exactly? Each test traces a
// service with one known cause of slow requests (tests/testprogs/services)
// and holds the report's JSON and text against the ground truth the service
// measured itself: its own clocks, /proc/thread-self/schedstat and the time
// it spent in the call that is its cause.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace loupe::testing {
namespace {

using nlohmann::json;

// The service serves for this long after "go"; the trace outlasts it so
// that every request lies wholly inside the trace.
constexpr int kServeSeconds = 2;
constexpr const char* kTraceDuration = "3s";

struct Truth {
  uint64_t begin_ns = 0, end_ns = 0, on_cpu_ns = 0, run_delay_ns = 0, cause_ns = 0;
  int64_t major_faults = -1;  // -1: the service does not count them
};

struct Traced {
  pid_t pid = 0;
  json report;
  std::string text;
  std::map<uint64_t, Truth> truth;  // by request id
};

struct Output {
  int exit_code = -1;
  std::string out;
};

// Runs argv to completion; stdout is captured, stderr goes to the test's.
Output Run(const std::vector<std::string>& argv) {
  ChildProcess child(argv);
  child.CloseStdin();
  Output result;
  result.out = child.ReadAll();
  result.exit_code = child.Wait();
  return result;
}

std::string Excerpt(const json& j, size_t limit = 4000) {
  std::string text = j.dump(1);
  if (text.size() > limit) text = text.substr(0, limit) + "\n...";
  return text;
}

std::string FirstLines(const std::string& text, int lines) {
  size_t end = 0;
  for (int i = 0; i < lines && end != std::string::npos; ++i) {
    end = text.find('\n', end == 0 ? 0 : end + 1);
  }
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string FormatMs(double ns) {
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << ns / 1e6 << " ms";
  return out.str();
}

// The number at key, or NaN when it is missing or not a number (so any
// comparison with it fails and the message shows the JSON).
// A class a request never waited in is absent from its off_cpu_ns: 0.
double OffCpu(const json& request, const std::string& wait) {
  const json off = request.value("off_cpu_ns", json::object());
  return off.is_object() && off.contains(wait) && off[wait].is_number() ? off[wait].get<double>() : 0;
}

double Number(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nan("");
  return j[key].get<double>();
}

std::string String(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "<missing>";
  return j[key].get<std::string>();
}

double SumOffCpu(const json& j) {
  if (!j.is_object() || !j.contains("off_cpu_ns") || !j["off_cpu_ns"].is_object()) {
    return std::nan("");
  }
  double sum = 0;
  for (const auto& [cls, ns] : j["off_cpu_ns"].items()) sum += ns.is_number() ? ns.get<double>() : 0;
  return sum;
}

// |measured - truth| within a relative tolerance or an absolute floor,
// whichever is larger.
bool Near(double measured, double truth, double relative, double floor_ns) {
  return std::fabs(measured - truth) <= std::max(relative * truth, floor_ns);
}

std::map<uint64_t, Truth> ReadTruth(const std::string& path) {
  std::map<uint64_t, Truth> truth;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    uint64_t id;
    Truth t;
    if (!(words >> id >> t.begin_ns >> t.end_ns >> t.on_cpu_ns >> t.run_delay_ns >> t.cause_ns)) {
      continue;
    }
    words >> t.major_faults;
    truth[id] = t;
  }
  return truth;
}

// Starts the service, traces it with tracectl attach for the whole time it
// serves, then reads its ground truth and both forms of the report.
void TraceService(const std::string& service, Traced* traced) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string binary = TestProgram(service);
  ChildProcess app({binary, dir.File("truth"), std::to_string(kServeSeconds)});
  const std::vector<std::string> ready = app.ReadWords();
  ASSERT_EQ(ready.size(), 2u) << service << " did not say ready";
  ASSERT_EQ(ready[0], "ready");
  traced->pid = app.pid();

  const std::string trace = dir.File("trace");
  ChildProcess attach({LOUPE_TRACECTL, "attach", std::to_string(app.pid()), "--duration",
                       kTraceDuration, "--uprobe", binary + ":handle_request(1)%return", "--output",
                       trace, "-q"},
                      ChildProcess::Stderr::kMerged);
  // The first request waits until every source and probe is attached: how
  // long that takes depends on the machine (the verifier alone took 0.3 to
  // 0.7 s per program with unwind tables on some), and a request served
  // before it is missing from the trace.
  std::string said;
  for (std::string line = attach.ReadLine(); line.find("probe site(s) attached") == std::string::npos;
       line = attach.ReadLine()) {
    if (line.empty()) FAIL() << "tracectl attach ended before attaching its probes: " << said;
    said += line + "\n";
  }
  app.WriteLine("go");
  const std::vector<std::string> done = app.ReadWords();
  ASSERT_EQ(done.size(), 2u) << service << " did not say done";
  ASSERT_EQ(done[0], "done");
  const int attach_code = attach.Wait();
  // 1 is a trace with losses (a stack cut short, say): still reportable.
  ASSERT_TRUE(attach_code == 0 || attach_code == 1) << "tracectl attach exited " << attach_code;
  app.CloseStdin();
  ASSERT_EQ(app.Wait(), 0) << service << " failed";

  traced->truth = ReadTruth(dir.File("truth"));
  ASSERT_EQ(traced->truth.size(), std::stoul(done[1]))
      << service << " wrote an unreadable ground truth file";
  ASSERT_GE(traced->truth.size(), 20u) << service << " served too few requests";

  const Output json_out = Run({LOUPE_TRACECTL, "report", trace, "--json", "--list", "20"});
  ASSERT_TRUE(json_out.exit_code == 0 || json_out.exit_code == 1)
      << "tracectl report --json --list 20 exited " << json_out.exit_code << ": "
      << json_out.out.substr(0, 2000);
  traced->report = json::parse(json_out.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(traced->report.is_discarded())
      << "tracectl report --json printed no JSON: " << json_out.out.substr(0, 2000);
  const Output text_out = Run({LOUPE_TRACECTL, "report", trace});
  ASSERT_TRUE(text_out.exit_code == 0 || text_out.exit_code == 1)
      << "tracectl report exited " << text_out.exit_code;
  traced->text = text_out.out;
}

// One way the requests are told: the uprobe on handle_request, or the
// shim's "request" operation.
struct RequestKind {
  std::string kind;
  std::string name;

  bool Matches(const json& j) const {
    return j.is_object() && String(j, "kind") == kind && String(j, "name") == name;
  }
  // A listed request is of this kind itself or names it among the kinds of
  // the same extent.
  bool Lists(const json& request) const {
    if (Matches(request)) return true;
    if (!request.contains("also") || !request["also"].is_array()) return false;
    for (const json& other : request["also"]) {
      if (Matches(other)) return true;
      if (other.is_string()) {
        const std::string s = other.get<std::string>();
        if (s == name || s == kind + ":" + name || s == kind + " " + name) return true;
      }
    }
    return false;
  }
  std::string Label() const { return kind + " " + name; }
};

std::vector<RequestKind> KindsOf(const std::string& service) {
  return {{"uprobe", service + ":handle_request"}, {"operation", "request"}};
}

struct Expected {
  std::string service;
  std::string dominant;        // of the slow requests; "" to take it from the ground truth
  std::string dominant_class;  // when blocked
  std::string evidence;        // blocking_stacks[0].function, or the top sampled function
  std::string waker_thread;    // wakers[0].thread, "" to skip
  std::string waker_context;   // wakers[0].context, "" to skip
  std::string waker_doing;     // in wakers[0].doing, "" to skip
  std::string holder_thread;   // cpu_holders[0].thread and .process, "" to skip
  std::string holder_process;
  std::string cause_class;     // off_cpu_ns class the service's cause_ns measures, "" if none
  // off_cpu_ns class that is all of a request's time off the CPU and off the
  // run queue (duration - on-CPU - run delay), "" if none.
  std::string remainder_class;
  // False where the thread's CPU clock leaves out much of its time on the
  // CPU: a virtual machine's exits for virtio kicks count as steal time,
  // not as the thread's, yet the thread holds the CPU throughout.
  bool cpu_clock_comparable = true;
  // The run-queue wait is the cgroup CPU quota's: throttled_ns holds the
  // service's cause_ns (the cgroup's own throttled time), and no CPU holder
  // is blamed for it.
  bool throttled = false;
  std::string culprit_text;    // must appear in the text report's first 30 lines
};

const json* FindKind(const json& report, const RequestKind& kind) {
  if (!report.contains("request_kinds") || !report["request_kinds"].is_array()) return nullptr;
  for (const json& k : report["request_kinds"]) {
    if (kind.Matches(k)) return &k;
  }
  return nullptr;
}

void CheckPartsAddUp(const json& j, double total, const std::string& what) {
  const double parts = Number(j, "on_cpu_ns") + Number(j, "runqueue_ns") +
                       Number(j, "queued_ns") + Number(j, "unaccounted_ns") + SumOffCpu(j);
  EXPECT_TRUE(Near(parts, total, 0.01, 0))
      << what << ": on_cpu + runqueue + queued + unaccounted + off_cpu = " << FormatMs(parts)
      << ", but the total is " << FormatMs(total) << "\n"
      << Excerpt(j);
}

// The dominant parts the ground truth allows for requests at least
// threshold_ns long: the largest of on-CPU, run delay and the rest (blocked),
// and the runner-up too when it is within 40 % of the largest.
std::vector<std::string> DominantFromTruth(const std::map<uint64_t, Truth>& truth,
                                           double threshold_ns) {
  std::vector<std::pair<double, std::string>> parts = {{0, "on_cpu"}, {0, "runqueue"}, {0, "blocked"}};
  for (const auto& [id, t] : truth) {
    const double duration = static_cast<double>(t.end_ns - t.begin_ns);
    if (duration < threshold_ns) continue;
    parts[0].first += static_cast<double>(t.on_cpu_ns);
    parts[1].first += static_cast<double>(t.run_delay_ns);
    parts[2].first += duration - static_cast<double>(t.on_cpu_ns + t.run_delay_ns);
  }
  std::sort(parts.rbegin(), parts.rend());
  std::vector<std::string> allowed = {parts[0].second};
  // The service's split and Loupe's differ by interrupt time (on-CPU for
  // Loupe, not on the thread's CPU clock) and wakeup latency (run-queue for
  // Loupe, "blocked" here): parts this close can trade places.
  if (parts[1].first >= 0.6 * parts[0].first) allowed.push_back(parts[1].second);
  return allowed;
}

void CheckSlowSummary(const json& kind_json, const RequestKind& kind, const Expected& expected,
                      const std::map<uint64_t, Truth>& truth) {
  const std::string where = kind.Label() + " slow summary";
  ASSERT_TRUE(kind_json.contains("slow") && kind_json["slow"].is_object())
      << where << " missing\n" << Excerpt(kind_json);
  const json& slow = kind_json["slow"];
  ASSERT_GT(Number(slow, "count"), 0) << where << ": no slow requests\n" << Excerpt(slow);
  if (expected.dominant.empty()) {
    std::vector<std::string> allowed = DominantFromTruth(truth, Number(slow, "threshold_ns"));
    // Steal time the CPU clock leaves out is on-CPU to Loupe.
    if (!expected.cpu_clock_comparable) allowed.push_back("on_cpu");
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), String(slow, "dominant")), allowed.end())
        << where << ": the ground truth of the requests over the threshold says "
        << ::testing::PrintToString(allowed) << "\n" << Excerpt(slow);
  } else {
    EXPECT_EQ(String(slow, "dominant"), expected.dominant) << where << "\n" << Excerpt(slow);
  }
  if (String(slow, "dominant") == "blocked" && !expected.dominant_class.empty()) {
    EXPECT_EQ(String(slow, "dominant_class"), expected.dominant_class) << where << "\n"
                                                                       << Excerpt(slow);
  }
  CheckPartsAddUp(slow, Number(slow, "total_ns"), where);

  if (expected.dominant == "on_cpu") {
    const json functions = slow.value("sampled", json::object()).value("functions", json::array());
    ASSERT_FALSE(functions.empty()) << where << ": no sampled functions\n" << Excerpt(slow);
    EXPECT_EQ(String(functions[0], "name"), expected.evidence)
        << where << ": hottest sampled function\n" << Excerpt(slow["sampled"]);
  } else if (!expected.evidence.empty()) {
    const json stacks = slow.value("blocking_stacks", json::array());
    ASSERT_FALSE(stacks.empty()) << where << ": no blocking stacks\n" << Excerpt(slow);
    EXPECT_EQ(String(stacks[0], "function"), expected.evidence)
        << where << ": top blocking stack\n" << Excerpt(stacks[0]);
  }

  if (!expected.waker_thread.empty() || !expected.waker_context.empty()) {
    const json wakers = slow.value("wakers", json::array());
    ASSERT_FALSE(wakers.empty()) << where << ": no wakers\n" << Excerpt(slow);
    if (!expected.waker_thread.empty()) {
      EXPECT_EQ(String(wakers[0], "thread"), expected.waker_thread)
          << where << ": top waker\n" << Excerpt(wakers);
    }
    if (!expected.waker_context.empty()) {
      EXPECT_EQ(String(wakers[0], "context"), expected.waker_context)
          << where << ": top waker\n" << Excerpt(wakers);
    }
    if (!expected.waker_doing.empty()) {
      EXPECT_NE(String(wakers[0], "doing").find(expected.waker_doing), std::string::npos)
          << where << ": what the top waker was doing\n" << Excerpt(wakers);
    }
  }
  if (expected.throttled) {
    const double runq = Number(slow, "runqueue_ns");
    EXPECT_GE(Number(slow, "throttled_ns"), 0.8 * runq)
        << where << ": the run-queue wait is the CPU quota's\n" << Excerpt(slow);
    double held = 0;
    for (const json& holder : slow.value("cpu_holders", json::array())) held += Number(holder, "ns");
    EXPECT_LE(held, 0.1 * runq) << where << ": CPU holders blamed for a throttled wait\n"
                                << Excerpt(slow);
  }
  if (!expected.holder_thread.empty()) {
    const json holders = slow.value("cpu_holders", json::array());
    ASSERT_FALSE(holders.empty()) << where << ": no CPU holders\n" << Excerpt(slow);
    EXPECT_EQ(String(holders[0], "thread"), expected.holder_thread)
        << where << ": top CPU holder\n" << Excerpt(holders);
    EXPECT_EQ(String(holders[0], "process"), expected.holder_process)
        << where << ": top CPU holder\n" << Excerpt(holders);
  }
}

void CheckListedRequests(const Traced& traced, const RequestKind& kind, const Expected& expected) {
  const json& report = traced.report;
  ASSERT_TRUE(report.contains("slowest") && report["slowest"].is_array())
      << "no slowest list\n" << Excerpt(report, 2000);
  const double first_ns = Number(report.value("trace", json::object()), "first_ns");
  const double last_ns = Number(report.value("trace", json::object()), "last_ns");
  int listed = 0;
  std::vector<json> inside_trace;
  // Requests whose run-queue time fell short of schedstat's run delay.
  std::vector<std::string> short_runq;
  for (const json& request : report["slowest"]) {
    if (!kind.Lists(request)) continue;
    ++listed;
    const std::string where = kind.Label() + " request " + request.value("args", json()).dump();
    ASSERT_TRUE(request.contains("args") && request["args"].is_array() &&
                !request["args"].empty() && request["args"][0].is_number_unsigned())
        << where << ": no id in args\n" << Excerpt(request);
    const uint64_t id = request["args"][0].get<uint64_t>();
    const auto it = traced.truth.find(id);
    ASSERT_NE(it, traced.truth.end()) << where << ": no request " << id
                                      << " in the service's ground truth\n" << Excerpt(request);
    const Truth& t = it->second;
    const double duration = Number(request, "duration_ns");
    const double truth_duration = static_cast<double>(t.end_ns - t.begin_ns);

    // The service's clocks run inside the operation, which runs inside
    // handle_request, whose entry and return the uprobes see: a thread
    // preempted in between (a starved one is) has a request longer than the
    // service saw, by run-queue time.
    const double outside = std::max(0.0, duration - truth_duration);
    EXPECT_GE(duration, truth_duration - 200e3)
        << where << ": duration " << FormatMs(duration) << ", the service measured "
        << FormatMs(truth_duration) << "\n" << Excerpt(request);
    CheckPartsAddUp(request, duration, where);
    const double begin = Number(request, "begin_ns");
    if (begin >= first_ns && begin + duration <= last_ns) inside_trace.push_back(request);
    // A switch missing from the trace leaves its stretch unaccounted: such a
    // request cannot be held to the service's split.
    if (Number(request, "unaccounted_ns") > 0.01 * duration) continue;
    // Loupe's on-CPU is switch-in to switch-out, which includes interrupts
    // taken while the thread ran (the thread's CPU clock leaves them out);
    // its run-queue starts at the wakeup (sched_waking), before the enqueue
    // that schedstat counts from — after an interrupt, an IPI later. So
    // on-CPU matches within interrupt time, and run-queue is at least
    // schedstat's, at most that plus the wait it ended.
    const double slack = 0.10 * duration + 500e3;
    const double on_cpu = Number(request, "on_cpu_ns"), runq = Number(request, "runqueue_ns");
    // Never less than the thread's CPU clock; more by what the clock leaves
    // out (interrupts, and a VM's steal time, which on this shared VM has
    // reached several ms per request), so no upper bound is asserted.
    if (expected.cpu_clock_comparable) {
      EXPECT_GE(on_cpu, static_cast<double>(t.on_cpu_ns) - slack)
          << where << ": on-CPU " << FormatMs(on_cpu) << ", the thread's CPU clock says "
          << FormatMs(t.on_cpu_ns) << "\n" << Excerpt(request);
    }
    const double truth_off = truth_duration - static_cast<double>(t.on_cpu_ns + t.run_delay_ns);
    if (runq < static_cast<double>(t.run_delay_ns) - slack) {
      short_runq.push_back(where + ": run-queue " + FormatMs(runq) +
                           ", schedstat run_delay says " + FormatMs(t.run_delay_ns) + "\n" +
                           Excerpt(request));
    }
    EXPECT_LE(runq, static_cast<double>(t.run_delay_ns) + std::max(0.0, truth_off) + slack + outside)
        << where << ": run-queue " << FormatMs(runq) << ", more than schedstat's "
        << FormatMs(t.run_delay_ns) << " and the time off CPU\n" << Excerpt(request);
    if (!expected.cause_class.empty()) {
      // Time inside the blocking call: blocked in it, then waiting for a
      // CPU and running once woken — the blocked part is the class.
      const double cause = OffCpu(request, expected.cause_class);
      EXPECT_LE(cause, static_cast<double>(t.cause_ns) + slack)
          << where << ": " << expected.cause_class << " " << FormatMs(cause)
          << ", the service measured " << FormatMs(t.cause_ns) << " in its cause\n"
          << Excerpt(request);
      EXPECT_GE(cause + runq + on_cpu, static_cast<double>(t.cause_ns) - slack)
          << where << ": " << expected.cause_class << " " << FormatMs(cause)
          << " (+ run-queue and on-CPU), the service measured " << FormatMs(t.cause_ns)
          << " in its cause\n" << Excerpt(request);
    }
    if (expected.throttled) {
      // From the switch-out with the quota spent to the switch-in: the
      // cgroup's throttled time, then any wait for the CPU after the refill.
      const double throttled = Number(request, "throttled_ns");
      EXPECT_GE(throttled, static_cast<double>(t.cause_ns) - slack)
          << where << ": throttled " << FormatMs(throttled) << ", the cgroup was throttled for "
          << FormatMs(t.cause_ns) << "\n" << Excerpt(request);
    }
    if (!expected.remainder_class.empty()) {
      const double blocked =
          OffCpu(request, expected.remainder_class);
      const double truth_blocked = truth_off;
      // What the service saw off its CPU clock holds Loupe's off-CPU time
      // (and, in a VM, the steal time Loupe counts as on-CPU).
      EXPECT_LE(blocked + runq, truth_blocked + static_cast<double>(t.run_delay_ns) + slack + outside)
          << where << ": " << expected.remainder_class << " " << FormatMs(blocked)
          << ", the service was off the CPU and off the run queue for " << FormatMs(truth_blocked)
          << " (" << t.major_faults << " major faults)\n" << Excerpt(request);
    }
  }
  // Loupe's run-queue time covers schedstat's run delay. On the
  // Firecracker guests these tests run on, the kernel never reports a
  // switch away from its agent's threads (process_api, pid 1), and a
  // target's wakeup can be missing too; the run delay its next switch-out
  // carries places that wakeup (MissedWakeups), unless that switch-out
  // comes too late for it to be written in time order: one such request is
  // let pass, two are not (docs/report.md, "Known limits").
  EXPECT_LE(short_runq.size(), 1u) << ::testing::PrintToString(short_runq);
  // Time the trace cannot place is unaccounted, never dropped: little of it
  // in requests the trace holds whole. On the VMs these tests run on the
  // kernel's own sched_switch stream has gaps (a thread switched out twice
  // in a row, right after the sandbox agent's threads ran: bpftrace sees
  // the same, tests/bench/switch_gaps.sh), and one gap costs a few ms of a
  // listed request: a tenth is the bound.
  double unaccounted = 0, total = 0;
  for (const json& request : inside_trace) {
    unaccounted += Number(request, "unaccounted_ns");
    total += Number(request, "duration_ns");
  }
  EXPECT_LE(unaccounted, 0.10 * total)
      << kind.Label() << ": the listed requests inside the trace are " << FormatMs(unaccounted)
      << " of " << FormatMs(total) << " unaccounted\n" << Excerpt(report["slowest"], 3000);
  EXPECT_GT(listed, 0) << "no listed request of kind " << kind.Label() << "\n"
                       << Excerpt(report["slowest"], 3000);
}

void CheckDiagnosis(const Expected& expected, Traced* traced) {
  ASSERT_NO_FATAL_FAILURE(TraceService(expected.service, traced));
  for (const RequestKind& kind : KindsOf(expected.service)) {
    SCOPED_TRACE(kind.Label());
    const json* kind_json = FindKind(traced->report, kind);
    ASSERT_NE(kind_json, nullptr) << "no request kind " << kind.Label() << " in\n"
                                  << Excerpt(traced->report.value("request_kinds", json()));
    EXPECT_EQ(Number(*kind_json, "count"), static_cast<double>(traced->truth.size()))
        << kind.Label() << ": the service served " << traced->truth.size() << " requests\n"
        << Excerpt(*kind_json);
    CheckSlowSummary(*kind_json, kind, expected, traced->truth);
    CheckListedRequests(*traced, kind, expected);
  }
  EXPECT_NE(FirstLines(traced->text, 30).find(expected.culprit_text), std::string::npos)
      << "the text report does not name " << expected.culprit_text << " early:\n"
      << FirstLines(traced->text, 40);
}

TEST(DiagnosisTest, LockHeldByJanitor) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "lock_service",
                  .dominant = "blocked",
                  .dominant_class = "lock",
                  .evidence = "lookup_shared_cache",
                  .waker_thread = "janitor",
                  .waker_doing = "janitor_compact_locked",
                  .cause_class = "lock",
                  .culprit_text = "janitor"},
                 &traced);
}

TEST(DiagnosisTest, PipeFedSlowly) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "pipe_service",
                  .dominant = "blocked",
                  .dominant_class = "pipe_socket",
                  .evidence = "read_upstream",
                  .waker_thread = "feeder",
                  .cause_class = "pipe_socket",
                  .culprit_text = "feeder"},
                 &traced);
}

// The backend is another process on the same host, over loopback TCP: its
// reply is received in a softirq on its own CPU, in its context. The
// waker is the backend, not "an interrupt (softirq)".
TEST(DiagnosisTest, LocalBackendOverLoopback) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "loopback_service",
                  .dominant = "blocked",
                  .dominant_class = "pipe_socket",
                  .evidence = "read_backend",
                  .waker_thread = "backend",
                  .waker_context = "task",
                  .cause_class = "pipe_socket",
                  .culprit_text = "fed by backend"},
                 &traced);
}

TEST(DiagnosisTest, ParsingOnCpu) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "parse_service",
                  .dominant = "on_cpu",
                  .evidence = "parse_payload",
                  .culprit_text = "parse_payload"},
                 &traced);
}

TEST(DiagnosisTest, StarvedByAnotherProcess) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "starve_service",
                  .dominant = "runqueue",
                  .holder_thread = "bg_compress",
                  .holder_process = "noisy",
                  .culprit_text = "bg_compress"},
                 &traced);
}

TEST(DiagnosisTest, SleepingBeforeRetry) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "sleep_retry_service",
                  .dominant = "sleep",
                  .evidence = "retry_backoff",
                  .waker_context = "timer",
                  .cause_class = "sleep",
                  .culprit_text = "retry_backoff"},
                 &traced);
}

// A file lock another process holds (a backup of a shared database): the
// kernel's lock, named as a lock, with the untraced holder as the waker.
TEST(DiagnosisTest, FileLockHeldByAnotherProcess) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "flock_service",
                  .dominant = "blocked",
                  .dominant_class = "lock",
                  .evidence = "take_lock_file",
                  .waker_thread = "backup",
                  .cause_class = "lock",
                  .culprit_text = "backup"},
                 &traced);
}

// A container's CPU limit: the requests wait to run while the CPU is free.
// Who ran on the CPU meanwhile (the idle task, or the tracer) is not the
// cause; the quota is.
TEST(DiagnosisTest, ThrottledByItsCpuQuota) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "throttle_service",
                  .dominant = "runqueue",
                  .throttled = true,
                  .culprit_text = "throttled by its cgroup's CPU quota"},
                 &traced);
}

// On a VM a major fault costs about as much CPU (the fault path, the
// virtio kick) as it waits for the disk: whether the slow requests are
// mostly blocked or mostly on the CPU is for the ground truth to say. What
// they wait for, and where, is not in doubt.
TEST(DiagnosisTest, MajorPageFaults) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "pagefault_service",
                  .dominant_class = "page_fault",
                  .evidence = "touch_records",
                  .remainder_class = "page_fault",
                  .cpu_clock_comparable = false,
                  .culprit_text = "touch_records"},
                 &traced);
}

// One request in eight makes a journal durable: its time is the disk's,
// through fdatasync in checkpoint_journal, and the rest writing the
// checkpoint into the page cache (on CPU): the dominant part follows the
// service's own split.
TEST(DiagnosisTest, DiskWaitInFdatasync) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "fsync_service",
                  .dominant_class = "block_io",
                  .evidence = "checkpoint_journal",
                  .cause_class = "block_io",
                  .culprit_text = "checkpoint_journal"},
                 &traced);
}

// Idle workers wait on a condition variable between requests: that is a
// condition wait, not lock contention, and it is not in the requests.
TEST(DiagnosisTest, ConditionWaitsOutsideRequests) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  CheckDiagnosis({.service = "condvar_service",
                  .dominant = "on_cpu",
                  .evidence = "compute_reply",
                  .culprit_text = "compute_reply"},
                 &traced);
  ASSERT_TRUE(traced.report.contains("threads") && traced.report["threads"].is_array())
      << Excerpt(traced.report, 2000);
  int workers = 0;
  for (const json& thread : traced.report["threads"]) {
    if (Number(thread, "pid") != traced.pid || String(thread, "name").rfind("worker-", 0) != 0) {
      continue;
    }
    ++workers;
    const json off_cpu =
        thread.value("outside_requests", json::object()).value("off_cpu_ns", json::object());
    const double condition = Number(off_cpu, "condition");
    EXPECT_GT(condition, 0) << "idle waits of " << String(thread, "name")
                            << " not classed as condition\n" << Excerpt(thread);
    for (const auto& [cls, ns] : off_cpu.items()) {
      EXPECT_LE(ns.get<double>(), condition)
          << String(thread, "name") << " waits outside requests more for " << cls
          << " than on its condition variable\n" << Excerpt(thread);
    }
    EXPECT_LT(off_cpu.value("lock", 0.0), 0.05 * condition)
        << "condition waits of " << String(thread, "name") << " taken for a lock\n"
        << Excerpt(thread);
  }
  EXPECT_EQ(workers, 2) << "worker threads in the thread table\n"
                        << Excerpt(traced.report["threads"], 3000);
  // The trace goes on a second after the last request: the workers and the
  // dispatcher have exited, and the main thread and its stdin reader wait
  // until the end. No thread's time is a wait without a class: not after
  // its exit, and not the wait the trace ends in (its stack is in the trace).
  for (const json& thread : traced.report["threads"]) {
    if (Number(thread, "pid") != traced.pid) continue;
    for (const char* part : {"in_requests", "outside_requests"}) {
      const json off_cpu = thread.value(part, json::object()).value("off_cpu_ns", json::object());
      EXPECT_LT(off_cpu.value("other", 0.0), 1e7)
          << String(thread, "name") << " has waits of no class " << part << "\n"
          << Excerpt(thread);
    }
  }
}

// One request is one operation bound on two threads: the acceptor reads it
// and passes it on, the worker takes it up. The slow ones waited in the
// queue while the worker flushed its log: queued between threads, the
// worker's flush_log named, and each listed request whole — from the
// acceptor's begin to the worker's end, its queued time the service's own.
TEST(DiagnosisTest, QueuedBetweenThreads) {
  LOUPE_REQUIRE_PRIVILEGES();
  Traced traced;
  ASSERT_NO_FATAL_FAILURE(TraceService("handoff_service", &traced));
  const RequestKind operation{"operation", "request"};
  const json* kind = FindKind(traced.report, operation);
  ASSERT_NE(kind, nullptr) << Excerpt(traced.report.value("request_kinds", json()));
  EXPECT_EQ(Number(*kind, "count"), static_cast<double>(traced.truth.size()))
      << "one request per id, not one per thread it was bound on\n" << Excerpt(*kind);
  EXPECT_EQ(Number(*kind, "passed_not_taken"), 0) << Excerpt(*kind);
  ASSERT_TRUE(kind->contains("slow")) << Excerpt(*kind);
  const json& slow = (*kind)["slow"];
  EXPECT_EQ(String(slow, "dominant"), "queued") << Excerpt(slow);
  CheckPartsAddUp(slow, Number(slow, "total_ns"), "slow requests");
  const json handoffs = slow.value("handoffs", json::array());
  ASSERT_FALSE(handoffs.empty()) << Excerpt(slow);
  EXPECT_EQ(String(handoffs[0].value("from", json()), "thread"), "acceptor") << Excerpt(handoffs);
  EXPECT_EQ(String(handoffs[0].value("to", json()), "thread"), "worker") << Excerpt(handoffs);

  int listed = 0, in_flush = 0;
  for (const json& request : traced.report.value("slowest", json::array())) {
    if (!operation.Lists(request)) continue;
    ++listed;
    const std::string where = "request " + request.value("args", json()).dump();
    ASSERT_TRUE(request["args"].is_array() && !request["args"].empty()) << Excerpt(request);
    const auto truth = traced.truth.find(request["args"][0].get<uint64_t>());
    ASSERT_NE(truth, traced.truth.end()) << where << Excerpt(request);
    const Truth& t = truth->second;
    const double duration = Number(request, "duration_ns");
    const double truth_duration = static_cast<double>(t.end_ns - t.begin_ns);
    // The operation begins just before the service's clock and ends just after.
    EXPECT_TRUE(duration >= truth_duration && duration <= truth_duration + 500e3)
        << where << ": " << FormatMs(duration) << ", the service measured "
        << FormatMs(truth_duration) << "\n" << Excerpt(request);
    EXPECT_TRUE(Near(Number(request, "queued_ns"), static_cast<double>(t.cause_ns), 0.02, 300e3))
        << where << ": queued " << FormatMs(Number(request, "queued_ns"))
        << ", the service measured " << FormatMs(t.cause_ns) << " from pass to take-up\n"
        << Excerpt(request);
    EXPECT_GE(Number(request, "on_cpu_ns"), static_cast<double>(t.on_cpu_ns) - 300e3)
        << where << ": on-CPU on both threads\n" << Excerpt(request);
    CheckPartsAddUp(request, duration, where);
    EXPECT_EQ(String(request.value("passed_from", json()), "thread"), "acceptor") << Excerpt(request);
    EXPECT_EQ(String(request, "thread"), "worker") << Excerpt(request);
    // What the worker did while it waited: its own time then, which the
    // wait's length bounds (off CPU includes waiting for one). The slowest
    // waited behind a flush: mostly on CPU outside requests.
    const json& taker = request.value("taker_while_queued", json());
    ASSERT_TRUE(taker.is_object() && taker.value("known", false)) << where << Excerpt(request);
    const double outside = Number(taker, "outside_requests_ns");
    const double meanwhile = outside + Number(taker, "in_other_requests_ns") + Number(taker, "off_cpu_ns");
    EXPECT_EQ(Number(taker, "blocked_ns") + Number(taker, "runqueue_ns"), Number(taker, "off_cpu_ns"))
        << where << ": off CPU is blocked and waiting for a CPU\n" << Excerpt(request);
    EXPECT_TRUE(Near(meanwhile, Number(request, "queued_ns"), 0.02, 300e3))
        << where << ": the worker's time while it was queued " << FormatMs(meanwhile)
        << ", queued " << FormatMs(Number(request, "queued_ns")) << "\n" << Excerpt(request);
    if (listed == 1) {
      EXPECT_GE(outside, 0.5 * Number(request, "queued_ns"))
          << where << ": the slowest waited while the worker flushed\n" << Excerpt(request);
    }
    in_flush += String(taker, "function") == "flush_log";
  }
  EXPECT_GT(listed, 0) << Excerpt(traced.report.value("slowest", json()), 3000);
  EXPECT_GT(in_flush, 0) << "no slow request's wait sampled the worker in flush_log\n"
                         << Excerpt(traced.report.value("slowest", json()), 3000);
  EXPECT_NE(FirstLines(traced.text, 30).find("mostly in flush_log"), std::string::npos)
      << FirstLines(traced.text, 40);
}

}  // namespace
}  // namespace loupe::testing
