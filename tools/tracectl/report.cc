#include "tools/tracectl/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "analysis/report_model.h"
#include "analysis/report_output.h"
#include "daemon/format/trace_reader.h"
#include "tools/tracectl/durations.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {
namespace {

analysis::TraceVerdict VerdictOf(const format::TraceReader& trace) {
  analysis::TraceVerdict verdict;
  for (const format::SegmentSummary& summary : trace.summaries()) {
    if (!summary.copy_of.empty()) {
      verdict.notes.push_back(fmt::format("{} holds the same segment as {}: read once",
                                          summary.path, summary.copy_of));
      continue;
    }
    verdict.complete = verdict.complete && summary.complete;
    verdict.events += summary.records_read;
    for (const auto& loss : summary.trailer.losses()) {
      verdict.losses.Add(static_cast<format::LossSource>(loss.source()),
                         static_cast<format::LossReason>(loss.reason()), loss.count());
    }
    for (const std::string& note : summary.trailer.notes()) {
      // A session's own notes repeat in each of its segments: said once.
      if (std::ranges::find(verdict.notes, note) == verdict.notes.end()) verdict.notes.push_back(note);
    }
    for (const std::string& problem : summary.problems) {
      // The reader's problems may name their file already.
      verdict.problems.push_back(problem.starts_with(summary.path) ? problem
                                                                   : summary.path + ": " + problem);
    }
  }
  return verdict;
}

}  // namespace

void AddReportCommand(CLI::App& app, ReportOptions& options) {
  CLI::App* command = app.add_subcommand(
      "report", "Why requests were slow, then who ran, who waited and why, hot code");
  command->add_option("paths", options.paths, "Segment files or directories");
  AddCollectorOptions(command, options.collector, /*time_flags=*/false);
  command->add_option("--pid", options.pid, "Only this process");
  command->add_option("--since", options.since,
                      "From this long after the trace's start (2s); with --collector, segments "
                      "started since (15m ago, or 2026-12-02T10:00:00Z)");
  command->add_option("--until", options.until,
                      "Until this long after the trace's start; with --collector, segments "
                      "started before");
  command->add_option("--operation", options.operation, "Only requests of this operation id");
  command->add_option("--slow", options.slow,
                      "Requests at least this long are the slow ones (default: each kind's p90)");
  command
      ->add_option("--request", options.requests,
                   "A request marked by two USDT probes: '[NAME=]PROVIDER:BEGIN..[PROVIDER:]END', "
                   "e.g. 'postgresql:query__start..query__done'")
      ->allow_extra_args(false);
  command->add_option("--list", options.list, "Slowest requests listed")
      ->capture_default_str()
      ->check(CLI::Range(0, 100'000));
  command->add_option("--top", options.top, "Rows of the top-functions and waits tables")
      ->capture_default_str();
  command->add_flag("--json", options.json, "One JSON object, for scripts (its fields: docs/report.md)");
}

int RunReport(const ReportOptions& options) {
  analysis::ReportOptions model_options{.pid = options.pid,
                                        .operation = options.operation,
                                        .list = options.list,
                                        .top = options.top};
  for (const std::string& text : options.requests) {
    absl::StatusOr<analysis::UsdtPair> pair = analysis::ParseUsdtPair(text);
    if (!pair.ok()) return Fail(pair.status());
    model_options.pairs.push_back(*std::move(pair));
  }
  if (!options.slow.empty()) {
    absl::StatusOr<uint64_t> ns = ParseDuration(options.slow, "--slow");
    if (!ns.ok()) return Fail(ns.status());
    model_options.slow_ns = *ns;
  }
  // With --collector the window picks segments by wall clock instead.
  CollectorQuery query = options.collector;
  const bool from_collector = !query.address.empty();
  if (from_collector) {
    query.since = options.since;
    query.until = options.until;
  }
  for (auto [text, flag, out] : {std::tuple{&options.since, "--since", &model_options.since_ns},
                                 std::tuple{&options.until, "--until", &model_options.until_ns}}) {
    if (text->empty() || from_collector) continue;
    absl::StatusOr<uint64_t> ns = ParseDuration(*text, flag, /*zero_ok=*/true);
    if (!ns.ok()) return Fail(ns.status());
    if (*ns == 0 && out == &model_options.until_ns) {
      return Fail(absl::InvalidArgumentError(
          fmt::format("--until {}: the window would end where the trace begins", *text)));
    }
    *out = *ns;
  }
  if (!options.since.empty() && !options.until.empty() && !from_collector &&
      model_options.since_ns > model_options.until_ns) {
    return Fail(absl::InvalidArgumentError(fmt::format(
        "--since {} is after --until {}: no request could be in between", options.since,
        options.until)));
  }
  std::unique_ptr<FetchedSegments> fetched;
  absl::StatusOr<std::vector<std::string>> sources = ResolveSources(options.paths, query, &fetched);
  if (!sources.ok()) return Fail(sources.status());
  absl::StatusOr<std::unique_ptr<format::TraceReader>> trace = format::TraceReader::Open(*sources);
  if (!trace.ok()) return Fail(trace.status());
  analysis::ReportModel model(std::move(model_options));
  for (const format::SegmentSummary& summary : (*trace)->summaries()) {
    if (summary.opened) model.AddHeader(summary.header);
  }
  format::Record record;
  size_t ended = 0;
  while ((*trace)->Next(&record)) {
    const std::vector<uint32_t>& sessions_ended = (*trace)->ended_sessions();
    for (; ended < sessions_ended.size(); ++ended) model.EndSession(sessions_ended[ended]);
    model.Add(record, (*trace)->session());
  }
  for (const format::SegmentSummary& summary : (*trace)->summaries()) {
    model.AddSymbols(summary.symbols);
  }
  model.Finish();
  if (options.pid && !model.HasProcess(*options.pid)) {
    return Fail(absl::NotFoundError(fmt::format(
        "--pid {}: no process with that pid in this trace (tracectl verify lists its processes)",
        *options.pid)));
  }
  if (options.operation && model.kinds().empty()) {
    return Fail(absl::NotFoundError(fmt::format(
        "--operation {}: no request of that operation id in this trace{}", *options.operation,
        options.since.empty() && options.until.empty() ? "" : " and window")));
  }
  if (!from_collector && !options.since.empty() &&
      model.options().since_ns > model.last_ns() - model.first_ns()) {
    return Fail(absl::InvalidArgumentError(
        fmt::format("--since {} is past the trace's end: it lasts {:.3f} s", options.since,
                    static_cast<double>(model.last_ns() - model.first_ns()) / 1e9)));
  }
  const analysis::TraceVerdict verdict = VerdictOf(**trace);
  const std::string out = options.json ? analysis::ReportJson(model, verdict)
                                       : analysis::ReportText(model, verdict);
  fwrite(out.data(), 1, out.size(), stdout);
  return verdict.complete ? kExitOk : kExitIncomplete;
}

}  // namespace loupe::tracectl
