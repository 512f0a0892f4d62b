#include "tools/tracectl/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "daemon/format/record_json.h"
#include "daemon/format/trace_reader.h"
#include "tools/tracectl/durations.h"
#include "tools/tracectl/exit_codes.h"
#include "tools/tracectl/report_model.h"

namespace loupe::tracectl {
namespace {

std::string Ms(uint64_t ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

std::string Json(std::string_view text) {
  std::string out;
  format::AppendJsonString(text, &out);
  return out;
}

struct Verdict {
  bool complete = true;
  std::map<std::string, uint64_t> losses;
  std::vector<std::string> problems;
};

Verdict VerdictOf(const format::TraceReader& trace) {
  Verdict verdict;
  for (const format::SegmentSummary& summary : trace.summaries()) {
    verdict.complete = verdict.complete && summary.complete;
    for (const auto& loss : summary.trailer.losses()) {
      verdict.losses[fmt::format("{}/{}", format::LossSourceName(
                                              static_cast<format::LossSource>(loss.source())),
                                 format::LossReasonName(
                                     static_cast<format::LossReason>(loss.reason())))] +=
          loss.count();
    }
    for (const std::string& problem : summary.problems) {
      verdict.problems.push_back(summary.path + ": " + problem);
    }
  }
  return verdict;
}

std::string FrameText(const NamedFrame& frame) {
  std::string text = frame.function + (frame.kernel ? " [k]" : "");
  if (!frame.file.empty()) {
    text += fmt::format(" ({}:{})", frame.file.substr(frame.file.rfind('/') + 1), frame.line);
  }
  return text;
}

// The largest entries of a map by value, largest first.
template <typename K>
std::vector<std::pair<K, uint64_t>> Largest(const std::map<K, uint64_t>& values, size_t n) {
  std::vector<std::pair<K, uint64_t>> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (sorted.size() > n) sorted.resize(n);
  return sorted;
}

// Each of the slowest spans and operations, and where its time went.
void PrintSlowest(const ReportModel& model) {
  if (model.slowest().empty()) return;
  fmt::print("\nslowest spans and operations (on their own thread)\n");
  for (const SlowSpan& span : model.slowest()) {
    fmt::print("  {} — {} on tid {} {}{}\n", Ms(span.duration_ns), span.name, span.tid,
               model.directory().ThreadName(span.tid),
               span.operation_id != 0 ? fmt::format(", operation {}", span.operation_id) : "");
    uint64_t off = 0;
    for (const auto& [why, ns] : span.off_cpu_ns) off += ns;
    const uint64_t period = model.sample_period_ns;
    fmt::print("      on-CPU ≈ {} (user {} samples, kernel {})", Ms((span.user_samples +
                                                                      span.kernel_samples) *
                                                                     period),
               span.user_samples, span.kernel_samples);
    for (const auto& [leaf, count] : Largest(span.leaves, 3)) {
      fmt::print("; {} ×{}", model.FunctionName(leaf.first, leaf.second, false), count);
    }
    fmt::print("\n      off-CPU {}", Ms(off));
    for (const auto& [why, ns] : Largest(span.off_cpu_ns, 4)) fmt::print("; {} {}", why, Ms(ns));
    fmt::print("\n");
    std::map<StackProfile::Key, uint64_t> blocked;
    for (const auto& [key, value] : span.blocked) blocked[key] = value.second;
    for (const auto& [key, ns] : Largest(blocked, 1)) {
      fmt::print("      blocked longest ({}) at:\n", Ms(ns));
      const std::vector<NamedFrame> frames = model.Frames(key);
      for (size_t i = 0; i < frames.size() && i < 16; ++i) {
        fmt::print("          {}\n", FrameText(frames[i]));
      }
    }
    for (const auto& [waker, ns] : Largest(span.wakers, 2)) {
      fmt::print("      woken by {} (ended {} of the wait)\n", model.Doing(waker), Ms(ns));
    }
    if (span.runq_ns != 0) {
      fmt::print("      run-queue wait {}", Ms(span.runq_ns));
      for (const auto& [tid, ns] : Largest(span.ran_instead, 2)) {
        fmt::print("; the CPU had {} ({})", model.Doing(tid), Ms(ns));
      }
      fmt::print("\n");
    }
  }
}

void PrintText(const ReportModel& model, const Verdict& verdict, size_t top) {
  fmt::print("verdict: {}\n", verdict.complete ? "complete" : "INCOMPLETE — do not trust absences");
  for (const auto& [what, count] : verdict.losses) fmt::print("  lost {} ({})\n", count, what);
  for (const std::string& problem : verdict.problems) fmt::print("  {}\n", problem);
  fmt::print("span of the trace: {}\n\n", Ms(model.last_ns() - model.first_ns()));

  fmt::print("threads (on-CPU from switches; off-CPU by what the kernel shows; run-queue wait)\n");
  for (const auto& [tid, thread] : model.threads()) {
    uint64_t off = 0;
    for (const auto& [why, ns] : thread.off_cpu_ns) off += ns;
    fmt::print("  {} {} (pid {}): on-CPU {}, off-CPU {}, {} samples\n", tid,
               model.directory().ThreadName(tid), model.directory().PidOf(tid),
               Ms(thread.on_cpu_ns), Ms(off), thread.samples);
    for (const auto& [why, ns] : thread.off_cpu_ns) fmt::print("      {:<28} {}\n", why, Ms(ns));
    if (thread.runq.count() != 0) {
      fmt::print("      run-queue wait: total {}, p50 {}, p99 {}, max {}\n",
                 Ms(thread.runq.total()), Ms(thread.runq.Quantile(0.5)),
                 Ms(thread.runq.Quantile(0.99)), Ms(thread.runq.max()));
    }
  }
  fmt::print("\ntop on-CPU functions ({} samples; self / total)\n", model.samples());
  for (const FunctionCost& cost : model.TopFunctions(top)) {
    fmt::print("  {:6} {:6}  {}\n", cost.self, cost.total, cost.name);
  }
  fmt::print("\ntop off-CPU stacks (time blocked)\n");
  for (const BlockingStack& stack : model.TopBlockingStacks(top)) {
    fmt::print("  {}\n", Ms(stack.off_cpu_ns));
    for (size_t i = 0; i < stack.frames.size() && i < 12; ++i) {
      fmt::print("      {}\n", FrameText(stack.frames[i]));
    }
  }
  for (const auto& [title, table] :
       {std::pair{"spans", &model.spans()}, std::pair{"uprobe calls", &model.calls()}}) {
    if (table->empty()) continue;
    fmt::print("\n{} (count, p50, p90, p99, max)\n", title);
    for (const auto& [name, latency] : *table) {
      fmt::print("  {:<24} {:7}  {}  {}  {}  {}\n", name, latency.count(),
                 Ms(latency.Quantile(0.5)), Ms(latency.Quantile(0.9)), Ms(latency.Quantile(0.99)),
                 Ms(latency.max()));
    }
  }
  if (!model.usdt().empty()) {
    fmt::print("\nUSDT probes\n");
    for (const auto& [probe, count] : model.usdt()) fmt::print("  {:<32} {}\n", probe, count);
  }
  PrintSlowest(model);
}

std::string LatencyJson(const LatencyHistogram& h) {
  return fmt::format(R"({{"count":{},"total_ns":{},"p50_ns":{},"p90_ns":{},"p99_ns":{},"max_ns":{}}})",
                     h.count(), h.total(), h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99),
                     h.max());
}

void PrintJson(const ReportModel& model, const Verdict& verdict, size_t top) {
  std::string out = fmt::format(R"({{"complete":{},"losses":{{)", verdict.complete);
  const char* comma = "";
  for (const auto& [what, count] : verdict.losses) {
    out += fmt::format("{}{}:{}", comma, Json(what), count);
    comma = ",";
  }
  out += fmt::format(R"(}},"duration_ns":{},"samples":{},"threads":[)",
                     model.last_ns() - model.first_ns(), model.samples());
  comma = "";
  for (const auto& [tid, thread] : model.threads()) {
    out += fmt::format(R"({}{{"tid":{},"pid":{},"name":{},"on_cpu_ns":{},"samples":{},"off_cpu_ns":{{)",
                       comma, tid, model.directory().PidOf(tid),
                       Json(model.directory().ThreadName(tid)), thread.on_cpu_ns, thread.samples);
    const char* inner = "";
    for (const auto& [why, ns] : thread.off_cpu_ns) {
      out += fmt::format("{}{}:{}", inner, Json(why), ns);
      inner = ",";
    }
    out += fmt::format(R"(}},"run_queue":{}}})", LatencyJson(thread.runq));
    comma = ",";
  }
  out += R"(],"top_functions":[)";
  comma = "";
  for (const FunctionCost& cost : model.TopFunctions(top)) {
    out += fmt::format(R"({}{{"name":{},"self":{},"total":{}}})", comma, Json(cost.name), cost.self,
                       cost.total);
    comma = ",";
  }
  out += R"(],"top_blocking_stacks":[)";
  comma = "";
  for (const BlockingStack& stack : model.TopBlockingStacks(top)) {
    out += fmt::format(R"({}{{"off_cpu_ns":{},"frames":[)", comma, stack.off_cpu_ns);
    const char* inner = "";
    for (const NamedFrame& frame : stack.frames) {
      out += fmt::format("{}{}", inner, Json(FrameText(frame)));
      inner = ",";
    }
    out += "]}";
    comma = ",";
  }
  out += "]";
  for (const auto& [key, table] :
       {std::pair{"spans", &model.spans()}, std::pair{"uprobe_calls", &model.calls()}}) {
    out += fmt::format(R"(,"{}":{{)", key);
    comma = "";
    for (const auto& [name, latency] : *table) {
      out += fmt::format("{}{}:{}", comma, Json(name), LatencyJson(latency));
      comma = ",";
    }
    out += "}";
  }
  out += R"(,"slowest":[)";
  comma = "";
  for (const SlowSpan& span : model.slowest()) {
    out += fmt::format(R"({}{{"name":{},"tid":{},"operation_id":{},"duration_ns":{},)"
                       R"("user_samples":{},"kernel_samples":{},"off_cpu_ns":{{)",
                       comma, Json(span.name), span.tid, span.operation_id, span.duration_ns,
                       span.user_samples, span.kernel_samples);
    const char* inner = "";
    for (const auto& [why, ns] : span.off_cpu_ns) {
      out += fmt::format("{}{}:{}", inner, Json(why), ns);
      inner = ",";
    }
    out += R"(},"wakers":[)";
    inner = "";
    for (const auto& [waker, ns] : span.wakers) {
      out += fmt::format(R"({}{{"tid":{},"ns":{},"doing":{}}})", inner, waker, ns,
                         Json(model.Doing(waker)));
      inner = ",";
    }
    out += fmt::format(R"(],"runq_ns":{}}})", span.runq_ns);
    comma = ",";
  }
  out += "]";
  out += R"(,"usdt":{)";
  comma = "";
  for (const auto& [probe, count] : model.usdt()) {
    out += fmt::format("{}{}:{}", comma, Json(probe), count);
    comma = ",";
  }
  out += "}}\n";
  fmt::print("{}", out);
}

}  // namespace

void AddReportCommand(CLI::App& app, ReportOptions& options) {
  CLI::App* command =
      app.add_subcommand("report", "What the traced threads did: time, hot code, waits, spans");
  command->add_option("paths", options.paths, "Segment files or directories");
  AddCollectorOptions(command, options.collector, /*time_flags=*/false);
  command->add_option("--pid", options.pid, "Only this process");
  command->add_option("--since", options.since,
                      "From this long after the trace's start (2s); with --collector, segments "
                      "started since (15m ago, or 2026-12-02T10:00:00Z)");
  command->add_option("--until", options.until,
                      "Until this long after the trace's start; with --collector, segments "
                      "started before");
  command->add_option("--operation", options.operation, "Only what was done for this operation id");
  command->add_option("--top", options.top, "Rows per table")->capture_default_str();
  command->add_flag("--json", options.json, "One JSON object, for scripts");
}

int RunReport(const ReportOptions& options) {
  ReportFilter filter{.pid = options.pid, .operation = options.operation};
  // With --collector the window picks segments by wall clock instead.
  CollectorQuery query = options.collector;
  const bool from_collector = !query.address.empty();
  if (from_collector) {
    query.since = options.since;
    query.until = options.until;
  }
  for (auto [text, flag, out] : {std::tuple{&options.since, "--since", &filter.since_ns},
                                 std::tuple{&options.until, "--until", &filter.until_ns}}) {
    if (text->empty() || from_collector) continue;
    absl::StatusOr<uint64_t> ns = ParseDuration(*text, flag, /*zero_ok=*/true);
    if (!ns.ok()) return Fail(ns.status());
    *out = *ns;
  }
  std::unique_ptr<FetchedSegments> fetched;
  absl::StatusOr<std::vector<std::string>> sources = ResolveSources(options.paths, query, &fetched);
  if (!sources.ok()) return Fail(sources.status());
  absl::StatusOr<std::unique_ptr<format::TraceReader>> trace = format::TraceReader::Open(*sources);
  if (!trace.ok()) return Fail(trace.status());
  ReportModel model(filter);
  format::Record record;
  while ((*trace)->Next(&record)) model.Add(record);
  for (const format::SegmentSummary& summary : (*trace)->summaries()) {
    model.AddSymbols(summary.symbols);
    const auto& config = summary.header.config();
    if (auto hz = config.find("sample_hz"); hz != config.end() && std::stoul(hz->second) > 0) {
      model.sample_period_ns = 1'000'000'000 / std::stoul(hz->second);
    }
  }
  model.Finish();
  const Verdict verdict = VerdictOf(**trace);
  if (options.json) {
    PrintJson(model, verdict, options.top);
  } else {
    PrintText(model, verdict, options.top);
  }
  return verdict.complete ? kExitOk : kExitIncomplete;
}

}  // namespace loupe::tracectl
