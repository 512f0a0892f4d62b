// The text report: verdict, then per request kind where the slow ones spent
// their time with evidence and one sentence, then the slowest requests,
// and only then the whole-trace tables.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "analysis/report_output.h"

namespace loupe::analysis {
namespace {

// Past this, the first request event is worth saying in the thread table.
constexpr uint64_t kRequestsLateNs = 5'000'000;

std::string Ms(uint64_t ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

// A percentile from the latency histogram: the upper bound of its bucket,
// within 1.6 % above the true value, so three significant digits and "≈".
std::string ApproxMs(uint64_t ns) {
  const double ms = static_cast<double>(ns) / 1e6;
  const int decimals = ms >= 100 ? 0 : ms >= 10 ? 1 : ms >= 1 ? 2 : 3;
  return fmt::format("≈{:.{}f} ms", ms, decimals);
}
std::string Pct(const Breakdown& b, uint64_t ns) { return fmt::format("{:.1f} %", b.Share(ns) * 100); }

std::string Who(const ThreadName& who) {
  if (who.tid == 0) return who.thread;
  return fmt::format("{} (tid {}, {})", who.thread, who.tid, who.process);
}

// "on-CPU 2.1 % · lock 96.8 % · run-queue 1.1 %": the parts, largest first, that add up.
std::string Parts(const Breakdown& b, bool with_shares) {
  std::vector<std::pair<std::string, uint64_t>> parts = {{"on-CPU", b.on_cpu_ns},
                                                         {"run-queue", b.runq_ns},
                                                         {"queued", b.queued_ns},
                                                         {"unaccounted", b.unaccounted_ns}};
  for (const auto& [wait, ns] : b.off_cpu_ns) parts.emplace_back(wait, ns);
  std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  auto amount = [&](uint64_t ns) { return with_shares ? Pct(b, ns) : Ms(ns); };
  std::string out;
  for (const auto& [name, ns] : parts) {
    if (ns == 0 && name != "on-CPU") continue;
    if (!out.empty()) out += " · ";
    out += fmt::format("{} {}", name, amount(ns));
    if (name == "run-queue" && b.throttled_ns > 0) {
      out += fmt::format(" (throttled {})", amount(b.throttled_ns));
    }
  }
  return out;
}

// With `lines`, each frame's file:line too.
std::string StackLine(const StackShare& stack, bool lines = false) {
  if (stack.frames.empty()) return "(no stack in the trace)";
  std::string line;
  for (const NamedFrame& frame : stack.frames) {
    if (!line.empty()) line += " ← ";
    line += lines ? FrameText(frame) : frame.kernel ? frame.function + " [k]" : frame.function;
  }
  return line;
}

// Rows of stacks by function names, with file:line on those that would
// read the same as another (two call sites in one function).
std::vector<std::string> StackLines(const std::vector<StackShare>& stacks) {
  std::map<std::string, int> seen;
  for (const StackShare& stack : stacks) ++seen[stack.wait + StackLine(stack)];
  std::vector<std::string> lines;
  for (const StackShare& stack : stacks) {
    lines.push_back(StackLine(stack, seen[stack.wait + StackLine(stack)] > 1));
  }
  return lines;
}

void Evidence(std::string& out, const Breakdown& b, const std::string& indent) {
  const std::vector<StackShare> shown(b.stacks.begin(),
                                      b.stacks.begin() + std::min<ptrdiff_t>(b.stacks.size(), 2));
  const std::vector<std::string> lines = StackLines(shown);
  for (size_t i = 0; i < shown.size(); ++i) {
    out += fmt::format("{}blocked ({}) {}: {}\n", indent, shown[i].wait, Ms(shown[i].ns), lines[i]);
  }
  for (size_t i = 0; i < b.wakers.size() && i < 2; ++i) {
    const auto& w = b.wakers[i];
    const std::string until =
        w.doing_woken_by ? fmt::format(" until {} woke it", Who(*w.doing_woken_by)) : "";
    out += fmt::format("{}woken by {} — ended {} of waiting{}\n", indent, Who(w.who), Ms(w.ns),
                       w.doing.empty()     ? ""
                       : w.doing_off_cpu ? ", while itself off CPU in " + w.doing + until
                                         : ", while in " + w.doing);
  }
  for (size_t i = 0; i < b.handoffs.size() && i < 2; ++i) {
    const auto& h = b.handoffs[i];
    out += fmt::format("{}queued {} after {} passed it on, until {} took it up\n", indent, Ms(h.ns),
                       Who(h.from), Who(h.to));
  }
  // One request's: summed over many, a taker's time would count once per
  // request. Nothing placed (no scheduler records) says nothing.
  const Breakdown::WhileQueued& t = b.taker;
  if (b.count == 1 && !b.handoffs.empty() && (t.unknown != 0 || t.unplaced_ns < b.queued_ns)) {
    const std::string taker =
        b.handoffs.size() == 1 ? b.handoffs.front().to.thread : "the threads that took it up";
    if (t.unknown != 0) {
      out += fmt::format("{}meanwhile {}: not known (the report keeps each thread's last 256 "
                         "intervals)\n",
                         indent, taker);
    } else {
      out += fmt::format("{}meanwhile {} ran {} outside requests{}, {} in other requests, {} blocked "
                         "{} and waited {} for a CPU{}\n",
                         indent, taker, Ms(t.outside_ns),
                         t.function.empty() ? "" : fmt::format(" (mostly in {}, sampled)", t.function),
                         Ms(t.inside_ns), b.handoffs.size() == 1 ? "was" : "were", Ms(t.blocked_ns),
                         Ms(t.runq_ns),
                         t.unplaced_ns == 0
                             ? ""
                             : fmt::format("; {} of the wait the trace cannot place", Ms(t.unplaced_ns)));
    }
  }
  if (b.throttled_ns > 0) {
    out += fmt::format("{}throttled by its cgroup's CPU quota {} of the run-queue {}: runnable, not "
                       "run until the quota refilled\n",
                       indent, Ms(b.throttled_ns), Ms(b.runq_ns));
  }
  if (!b.holders.empty()) {
    out += indent + "CPU held by";
    for (size_t i = 0; i < b.holders.size() && i < 3; ++i) {
      const Breakdown::Holder& holder = b.holders[i];
      out += fmt::format("{} {} {}{}", i ? "," : "", Who(holder.who), Ms(holder.ns),
                         holder.doing.empty() ? "" : fmt::format(" (in {}, sampled)", holder.doing));
    }
    out += fmt::format(" (run-queue {})\n", Ms(b.runq_ns));
  }
  if (!b.functions.empty()) {
    out += fmt::format("{}hot functions (sampled: {} user, {} kernel samples):", indent,
                       b.user_samples, b.kernel_samples);
    for (size_t i = 0; i < b.functions.size() && i < 3; ++i) {
      out += fmt::format(" {} ×{}", b.functions[i].first, b.functions[i].second);
    }
    out += "\n";
  }
}

std::string_view LeftBy(format::Unwound unwound) {
  switch (unwound) {
    case format::Unwound::kByException: return "; left by an exception (to its catch)";
    case format::Unwound::kByLongjmp: return "; left by a longjmp (to the jump)";
    case format::Unwound::kNo: break;
  }
  return "";
}

// Why threads' times may miss switches that happened: events lost that may
// have been switches, and segments not read whole. Empty when none.
std::string SwitchLossCause(const TraceVerdict& verdict) {
  uint64_t sched = 0, late = 0;
  std::vector<std::string> of_every_kind;
  for (const auto& [what, count] : verdict.losses.lost) {
    if (what.starts_with("sched/")) {
      sched += count;
    } else if (what.starts_with("merge/")) {
      late += count;  // written, but out of time order
    } else if (MayHoldSwitches(what)) {
      of_every_kind.push_back(fmt::format("{} {}", what, count));
    }
  }
  std::vector<std::string> causes;
  if (sched != 0) causes.push_back(fmt::format("{} scheduler events were lost", sched));
  if (!of_every_kind.empty()) {
    causes.push_back(
        fmt::format("events of every kind were lost ({})", fmt::join(of_every_kind, ", ")));
  }
  if (late != 0) causes.push_back(fmt::format("{} events were written out of time order", late));
  if (!verdict.problems.empty()) {
    causes.push_back(fmt::format("segments could not be read whole ({} problem(s) above)",
                                 verdict.problems.size()));
  }
  return fmt::format("{}", fmt::join(causes, ", and "));
}

}  // namespace

std::string FrameText(const NamedFrame& frame) {
  std::string text = frame.function + (frame.kernel ? " [k]" : "");
  if (!frame.file.empty()) {
    text += fmt::format(" ({}:{})", frame.file.substr(frame.file.rfind('/') + 1), frame.line);
  }
  return text;
}

std::string ReportText(const ReportModel& model, const TraceVerdict& verdict) {
  std::string out;
  out += fmt::format("verdict: {} — {} events over {}\n",
                     verdict.complete ? "complete" : "INCOMPLETE (do not trust absences)",
                     verdict.events, Ms(model.last_ns() - model.first_ns()));
  for (const std::string& line : verdict.losses.Lines()) out += fmt::format("  {}\n", line);
  for (const std::string& problem : verdict.problems) out += fmt::format("  {}\n", problem);
  for (const std::string& note : verdict.notes) out += fmt::format("  note: {}\n", note);
  if (!model.has_sched_data()) {
    out += "  no scheduler records in this trace: request times cannot be split and read as "
           "unaccounted\n";
  }
  if (!model.has_sched_data()) {
    out += fmt::format("hot functions are sampled ({} Hz); percentiles (≈) are within 1.6 %\n",
                       model.sample_hz());
  } else if (const std::string cause = SwitchLossCause(verdict); !cause.empty()) {
    out += fmt::format("times come from context switches, but {}: a thread's times miss what "
                       "they would have told (requests count it as unaccounted); hot functions "
                       "are sampled ({} Hz); percentiles (≈) are within 1.6 %\n",
                       cause, model.sample_hz());
  } else if (model.unplaced_stretches() != 0) {
    out += fmt::format("times come from context switches, but {} stretch(es) of threads' time ({}) "
                       "have no switch in the trace to place them ({}): they read as unaccounted; "
                       "hot functions are sampled ({} Hz); percentiles (≈) are within 1.6 %\n",
                       model.unplaced_stretches(), Ms(model.unplaced_ns()),
                       model.starts_mid_session()
                           ? "the trace lacks its session's first segments, so threads' time "
                             "before their first record in it is not known; or a switch the "
                             "kernel did not report, docs/bpf.md"
                           : "a switch the kernel did not report, docs/bpf.md",
                       model.sample_hz());
  } else {
    out += fmt::format("times are exact, from context switches; hot functions are sampled ({} Hz); "
                       "percentiles (≈) are within 1.6 %\n",
                       model.sample_hz());
  }
  if (model.threads_across_sessions() != 0 && model.threads_in_overlapping_sessions() == 0) {
    out += fmt::format("  {} sessions are read together: what {} thread(s) did between them was not "
                       "traced and is in no thread's times, and no request pairs across them\n",
                       model.sessions(), model.threads_across_sessions());
  }
  if (model.threads_in_overlapping_sessions() != 0) {
    out += fmt::format("  but {} thread(s) were traced by two sessions at the same time: read "
                       "together, their events are there twice, so while the later session "
                       "traced them its records are used; report each session's files alone for "
                       "the other\n",
                       model.threads_in_overlapping_sessions());
  }
  if (model.inferred_switches() != 0) {
    out += fmt::format("  but {} switch-in(s) the kernel did not report were placed from its scheduler "
                       "accounting, to a few µs (docs/bpf.md)\n",
                       model.inferred_switches());
  }

  if (model.kinds().empty()) out += "\nno requests (spans, operations, uprobe %return calls, --request pairs)\n";
  if (model.ends_without_begin() != 0) {
    out += fmt::format("\n{} span or operation ends without their begin (begun before {}, "
                       "or the begin was lost): their kinds are not known\n",
                       model.ends_without_begin(),
                       model.options().since_ns > 0 ? "--since or before the trace" : "the trace");
  }
  // A --request probe that never fired explains an empty or missing kind.
  for (const UsdtPair& pair : model.options().pairs) {
    for (const std::string& probe : {pair.begin_probe, pair.end_probe}) {
      if (!model.usdt().contains(probe)) {
        out += fmt::format("\n--request {}..{}: {} never fired in this trace\n", pair.begin_probe,
                           pair.end_probe, probe);
      }
    }
  }
  for (const KindReport& kind : model.kinds()) {
    if (kind.count == 0) {
      out += fmt::format("\n{} ({}): no complete request\n", kind.kind.name,
                         RequestSourceName(kind.kind.source));
    } else {
      out += fmt::format("\n{} ({}): {} requests, p50 {}, p90 {}, p99 {}, max {}\n",
                         kind.kind.name, RequestSourceName(kind.kind.source), kind.count,
                         ApproxMs(kind.p50_ns), ApproxMs(kind.p90_ns), ApproxMs(kind.p99_ns),
                         Ms(kind.max_ns));
    }
    if (kind.unpaired_begins + kind.unpaired_ends != 0) {
      out += fmt::format("  unpaired: {} begun without an end, {} ended without a begin\n",
                         kind.unpaired_begins, kind.unpaired_ends);
    }
    if (kind.unwound != 0) {
      out += fmt::format("  {} of them left by an exception, not a return: timed from the call to "
                         "where the exception was caught\n",
                         kind.unwound);
    }
    if (kind.longjmped != 0) {
      out += fmt::format("  {} of them left by a longjmp, not a return: timed from the call to the "
                         "jump\n",
                         kind.longjmped);
    }
    if (kind.passed_not_taken != 0) {
      out += fmt::format("  {} passed on to another thread and not taken up in the trace (no duration)\n",
                         kind.passed_not_taken);
    }
    if (kind.pairing_lost != 0) {
      out += fmt::format("  approximate: {} events that could be its begins or ends were lost, so "
                         "some begins may be paired with later calls' ends (times too long)\n",
                         kind.pairing_lost);
    }
    const Breakdown& slow = kind.slow;
    if (kind.count == 0) continue;
    if (slow.count == 0) {
      // Only a --slow threshold above every request leaves none: say so.
      out += fmt::format("  slow: no request ≥ {} ({}); the longest took {}\n",
                         Ms(kind.threshold_ns), kind.threshold_rule, Ms(kind.max_ns));
      continue;
    }
    out += fmt::format("  slow: {} requests ≥ {} ({}), {} in all: {}\n", slow.count,
                       Ms(kind.threshold_ns), kind.threshold_rule, Ms(slow.duration_ns),
                       Parts(slow, true));
    out += fmt::format("  → {}\n", slow.sentence);
    if (slow.evidence_count != slow.count) {
      out += fmt::format("    (samples, CPU holders and wakers below are of {} of the {} slow requests)\n",
                         slow.evidence_count, slow.count);
    }
    Evidence(out, slow, "    ");
  }

  if (!model.slowest().empty()) out += "\nslowest requests\n";
  size_t rank = 0;
  for (const RequestReport& request : model.slowest()) {
    std::string args;
    for (int64_t arg : request.args) args += fmt::format("{}{}", args.empty() ? " args " : ",", arg);
    std::string also;
    for (const std::string& other : request.also) also += (also.empty() ? "; also " : ", ") + other;
    const std::string from =
        request.passed_from ? fmt::format(" (from {})", Who(*request.passed_from)) : "";
    out += fmt::format("  {}. {} {} on {}{} at +{}{}{}{}\n", ++rank, Ms(request.duration_ns),
                       request.kind.name, Who(request.thread), from,
                       Ms(request.begin_ns - model.first_ns()), args, also,
                       LeftBy(request.unwound));
    out += fmt::format("       {}\n", Parts(request.breakdown, false));
    Evidence(out, request.breakdown, "       ");
  }

  out += fmt::format("\nthreads{}: inside requests | outside requests\n", model.WindowLabel());
  // Probes attach after the scheduler's programs: say from when requests
  // could be seen, past a few ms (under that, it is noise).
  if (const uint64_t seen = model.first_request_event_ns(); seen > model.first_ns() + kRequestsLateNs) {
    out += fmt::format("  (the first request begins or ends at +{}: a request already under way "
                       "before it, or before the probes came up, reads as outside)\n",
                       Ms(seen - model.first_ns()));
  }
  for (const ThreadReport& thread : model.threads()) {
    const Breakdown& in = thread.inside;
    // A thread that never served a request has no inside to show.
    const bool served = in.on_cpu_ns + in.runq_ns + in.blocked_ns + in.sleep_ns + in.queued_ns +
                            in.unaccounted_ns != 0;
    out += fmt::format("  {}\n", Who(thread.thread));
    if (served) out += fmt::format("      inside:  {}\n", Parts(in, false));
    out += fmt::format("      outside: {}\n", Parts(thread.outside, false));
  }
  const size_t top = model.options().top;
  out += fmt::format("\ntop on-CPU functions{} (sampled, {} samples; self / total)\n",
                     model.WindowLabel(), model.top_function_samples());
  for (const auto& cost : model.TopFunctions(top)) {
    out += fmt::format("  {:6} {:6}  {}\n", cost.self, cost.total, cost.name);
  }
  for (bool inside : {true, false}) {
    out += fmt::format("\nwaits {} requests by stack{} (each stack's waits summed)\n",
                       inside ? "inside" : "outside", model.WindowLabel());
    const std::vector<StackShare> waits = model.TopWaits(inside, top);
    const std::vector<std::string> lines = StackLines(waits);
    for (size_t i = 0; i < waits.size(); ++i) {
      out += fmt::format("  {} {}: {}\n", Ms(waits[i].ns), waits[i].wait, lines[i]);
    }
  }
  if (!model.usdt().empty()) {
    out += "\nUSDT probes\n";
    for (const auto& [probe, count] : model.usdt()) out += fmt::format("  {:<32} {}\n", probe, count);
  }
  return out;
}

}  // namespace loupe::analysis
