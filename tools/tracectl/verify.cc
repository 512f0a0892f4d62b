#include "tools/tracectl/verify.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <variant>

#include "daemon/base/overloaded.h"
#include "daemon/base/status_util.h"
#include "daemon/base/utf8.h"
#include "daemon/format/loss_tally.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/trace_reader.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {
namespace {

using format::RecordKind;

struct SegmentReport {
  std::string path;
  std::string open_error;
  bool complete = false;
  std::vector<std::string> reasons;  // trailer verdict reasons, then reading problems
  std::vector<std::string> notes;    // the trailer's: what the session learnt while writing
  uint64_t events = 0;
  std::map<std::string, uint64_t> kinds;
  format::LossTally losses;  // the trailer's when sealed, else the Loss records read
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::map<uint32_t, std::string> targets;  // pid -> name
  std::string session, host, boot_id;
  uint64_t sequence = 0;
  // What the session could do on its kernel and with its rights (the header's).
  std::map<std::string, std::string> features;
  int64_t realtime_offset_ns = 0;  // realtime - monotonic at the segment's start
  std::string copy_of;  // holds the same segment as that file: counted once, there
};

// "name", or "name, pid N in its namespace" when that differs.
std::string TargetName(uint32_t pid, const format::ProcessInfo& process) {
  if (process.ns_pid == pid) return std::string(process.name);
  return fmt::format("{}, pid {} in its namespace", process.name, process.ns_pid);
}

SegmentReport VerifySegment(const std::string& path) {
  using namespace format;
  SegmentReport report;
  report.path = path;
  auto reader = format::SegmentReader::Open(path);
  if (!reader.ok()) {
    report.open_error = std::string(MessageOf(reader.status()));
    report.reasons.push_back(report.open_error);
    return report;
  }
  const v1::SegmentHeader& header = (*reader)->header();
  report.session = header.session_id();
  report.boot_id = header.boot_id();
  report.host = header.host();
  report.sequence = header.sequence();
  report.features.insert(header.kernel_features().begin(), header.kernel_features().end());
  report.realtime_offset_ns =
      static_cast<int64_t>(header.clock().realtime_ns() - header.clock().monotonic_ns());
  format::LossTally streamed;
  format::Record record;
  while ((*reader)->Next(&record)) {
    ++report.events;
    ++report.kinds[std::string(format::KindName(record.kind()))];
    report.first_ns = std::min(report.first_ns, record.time_ns);
    report.last_ns = std::max(report.last_ns, record.time_ns);
    std::visit(Overloaded{
                   [&](const Loss& loss) { streamed.Add(loss.source, loss.reason, loss.count); },
                   [&](const ProcessInfo& process) {
                     report.targets[record.tid] = TargetName(record.tid, process);
                   },
                   // Counted by kind above.
                   [](const ClockSync&) {}, [](const ThreadInfo&) {}, [](const ProcessFork&) {},
                   [](const ProcessExec&) {}, [](const ThreadExit&) {}, [](const SchedSwitch&) {},
                   [](const SchedWakeup&) {}, [](const SchedMigrate&) {}, [](const CpuSample&) {},
                   [](const OffCpu&) {}, [](const UprobeEntry&) {}, [](const UprobeReturn&) {},
                   [](const UsdtEvent&) {}, [](const SpanBegin&) {}, [](const SpanEnd&) {},
                   [](const Instant&) {}, [](const Counter&) {}, [](const OperationBegin&) {},
                   [](const OperationEnd&) {}},
               record.payload);
  }
  const format::SegmentReader& r = **reader;
  // A sealed segment's trailer holds every loss, also those of the writer
  // itself (a write that failed cannot leave a Loss record behind).
  if (r.has_trailer()) {
    for (const auto& loss : r.trailer().losses()) {
      report.losses.Add(static_cast<LossSource>(loss.source()),
                        static_cast<LossReason>(loss.reason()), loss.count());
    }
  } else {
    report.losses = std::move(streamed);
  }
  for (const std::string& reason : r.trailer().reasons()) report.reasons.push_back(reason);
  for (const std::string& note : r.trailer().notes()) report.notes.push_back(Utf8Text(note));
  for (const std::string& problem : r.problems()) report.reasons.push_back(problem);
  if (r.unknown_records_skipped() > 0) {
    report.reasons.push_back(fmt::format(
        "{} records of kinds this tracectl does not know were skipped (written by a newer Loupe)",
        r.unknown_records_skipped()));
  }
  if (r.has_trailer() && r.trailer().event_count() != report.events + r.unknown_records_skipped()) {
    report.reasons.push_back(fmt::format("trailer counts {} events but {} were read",
                                         r.trailer().event_count(), report.events));
  }
  report.complete = r.complete() && report.reasons.empty();
  return report;
}

std::string Clock(const SegmentReport& s, uint64_t monotonic_ns) {
  const int64_t realtime = static_cast<int64_t>(monotonic_ns) + s.realtime_offset_ns;
  const time_t seconds = realtime / 1'000'000'000;
  tm utc;
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     (realtime % 1'000'000'000) / 1000);
}

void PrintText(const std::vector<SegmentReport>& segments, bool complete) {
  uint64_t events = 0, lost = 0, cut = 0;
  // The features are the session's: shown with its first segment, and again
  // only where they change.
  std::map<std::string, std::string> shown_features;
  size_t counted = 0;
  for (const SegmentReport& s : segments) {
    if (!s.copy_of.empty()) {
      fmt::print("copy        {}\n    the same segment as {} (session {} #{}): counted there, once\n",
                 s.path, s.copy_of, s.session, s.sequence);
      continue;
    }
    ++counted;
    events += s.events;
    fmt::print("{}  {}\n", s.complete ? "complete  " : "INCOMPLETE", s.path);
    if (!s.open_error.empty()) {
      fmt::print("    unreadable: {}\n", s.open_error);
      continue;
    }
    fmt::print("    session {} #{}  host {}  {} events", s.session, s.sequence,
               s.host.empty() ? "-" : s.host, s.events);
    if (s.events > 0) {
      fmt::print("  {} .. {} ({:.3f} s)", Clock(s, s.first_ns), Clock(s, s.last_ns),
                 static_cast<double>(s.last_ns - s.first_ns) / 1e9);
    }
    fmt::print("\n");
    std::string kinds;
    for (const auto& [kind, count] : s.kinds) kinds += fmt::format(" {}={}", kind, count);
    fmt::print("    kinds:{}\n", kinds);
    if (!s.targets.empty()) {
      std::string targets;
      for (const auto& [pid, name] : s.targets) targets += fmt::format(" {}({})", pid, name);
      fmt::print("    processes:{}\n", targets);
    }
    if (!s.features.empty() && s.features != shown_features) {
      fmt::print("    features:\n");
      for (const auto& [name, value] : s.features) fmt::print("      {}: {}\n", name, value);
      shown_features = s.features;
    }
    for (const std::string& line : s.losses.Lines()) fmt::print("    {}\n", line);
    for (const auto& [what, count] : s.losses.lost) lost += count;
    for (const auto& [what, count] : s.losses.cut) cut += count;
    for (const std::string& reason : s.reasons) fmt::print("    reason: {}\n", reason);
    for (const std::string& note : s.notes) fmt::print("    note: {}\n", note);
  }
  fmt::print("{}: {} segment(s), {} events, {} lost{}\n", complete ? "COMPLETE" : "INCOMPLETE",
             counted, events, lost, cut > 0 ? fmt::format(", {} cut", cut) : "");
}

void PrintJson(const std::vector<SegmentReport>& segments, bool complete) {
  using Json = nlohmann::ordered_json;
  const auto verdict = [](bool whole) { return whole ? "complete" : "incomplete"; };
  Json out = {{"verdict", verdict(complete)}, {"segments", Json::array()}};
  for (const SegmentReport& s : segments) {
    if (!s.copy_of.empty()) {
      out["segments"].push_back({{"path", s.path},
                                 {"verdict", "copy"},
                                 {"copy_of", s.copy_of},
                                 {"session", s.session},
                                 {"sequence", s.sequence}});
      continue;
    }
    Json segment = {{"path", s.path},         {"verdict", verdict(s.complete)},
                    {"events", s.events},     {"session", s.session},
                    {"sequence", s.sequence}};
    if (s.events > 0) {
      segment["first_time_ns"] = s.first_ns;
      segment["last_time_ns"] = s.last_ns;
    }
    segment["kinds"] = s.kinds;
    segment["losses"] = s.losses.lost;
    segment["cuts"] = s.losses.cut;
    segment["targets"] = Json::array();
    for (const auto& [pid, name] : s.targets) {
      segment["targets"].push_back({{"pid", pid}, {"name", name}});
    }
    segment["features"] = s.features;
    segment["reasons"] = s.reasons;
    segment["notes"] = s.notes;
    out["segments"].push_back(std::move(segment));
  }
  // Names and paths are bytes, not always UTF-8: a byte that is not becomes U+FFFD.
  fmt::print("{}\n", out.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

void AddVerifyCommand(CLI::App& app, VerifyOptions& options) {
  CLI::App* verify = app.add_subcommand("verify", "State whether a trace is complete and why not");
  verify->add_option("paths", options.paths, "Segment files or directories of them");
  AddCollectorOptions(verify, options.collector, /*time_flags=*/true);
  verify->add_flag("--json", options.json, "Machine-readable output");
}

int RunVerify(const VerifyOptions& options) {
  std::unique_ptr<FetchedSegments> fetched;
  absl::StatusOr<std::vector<std::string>> sources =
      ResolveSources(options.paths, options.collector, &fetched);
  if (!sources.ok()) return Fail(sources.status());
  absl::StatusOr<std::vector<std::string>> files = format::ExpandSegmentPaths(*sources);
  if (!files.ok()) return Fail(files.status());
  std::vector<SegmentReport> segments;
  std::vector<std::optional<format::SegmentId>> ids;
  for (const std::string& file : *files) {
    segments.push_back(VerifySegment(file));
    const SegmentReport& s = segments.back();
    ids.push_back(s.open_error.empty()
                      ? std::optional(format::SegmentId{s.boot_id, s.session, s.sequence})
                      : std::nullopt);
  }
  // As report and export read them: a copy once.
  const std::vector<size_t> read_as = format::CopiesReadAs(*files, ids);
  bool complete = true;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (read_as[i] != i) {
      segments[i].copy_of = (*files)[read_as[i]];
    } else {
      complete = complete && segments[i].complete;
    }
  }
  if (options.json) {
    PrintJson(segments, complete);
  } else {
    PrintText(segments, complete);
  }
  return complete ? kExitOk : kExitIncomplete;
}

}  // namespace loupe::tracectl
