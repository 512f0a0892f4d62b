#include "tools/tracectl/export.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/base/status_util.h"
#include "daemon/format/record_json.h"
#include "daemon/format/trace_reader.h"
#include "tools/tracectl/exit_codes.h"
#include "analysis/perfetto_export.h"
#include "analysis/pprof_writer.h"
#include "analysis/stack_profile.h"

namespace loupe::tracectl {

using analysis::NamedFrame;
using analysis::PprofTimes;
using analysis::StackProfile;
using analysis::StackTotals;
namespace {

// "-" is standard output. A file that cannot be opened fails before the
// export starts, with the reason.
class Output {
 public:
  static absl::StatusOr<std::unique_ptr<Output>> Open(const std::string& path) {
    std::unique_ptr<Output> output(new Output(path));
    if (path != "-") {
      output->file_ = std::make_unique<std::ofstream>(path, std::ios::trunc);
      if (!*output->file_) return ErrnoStatus("open", path);
    }
    return output;
  }
  std::ostream& stream() { return file_ ? *file_ : std::cout; }
  absl::Status Close() {
    if (file_) file_->close();
    if (!stream()) return ErrnoStatus("write", path_);  // ENOSPC, EIO: the stream keeps errno
    return absl::OkStatus();
  }

 private:
  explicit Output(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::unique_ptr<std::ofstream> file_;
};

// Records as JSON lines, in time order, as they stream by.
absl::Status ExportJson(format::TraceReader& trace, const std::string& path) {
  absl::StatusOr<std::unique_ptr<Output>> output = Output::Open(path);
  if (!output.ok()) return output.status();
  format::Record record;
  std::string line;
  while (trace.Next(&record)) {
    line.clear();
    format::AppendRecordJson(record, &line);
    line += '\n';
    (*output)->stream() << line;
  }
  return (*output)->Close();
}

// One line per stack, process first and leaf last: "app;main;work;leaf 42".
// Kernel frames end in "_[k]", as perf's collapsers write them. Stacks that
// differ only in addresses (other call sites in the same functions) read
// the same and are one line, in the order first met.
absl::Status ExportFolded(const StackProfile& profile, bool off_cpu, const std::string& path) {
  std::vector<std::pair<std::string, uint64_t>> lines;
  absl::flat_hash_map<std::string, size_t> line_of;
  for (uint32_t id = 1; id <= profile.stack_count(); ++id) {
    const StackTotals& totals = profile.totals(id);
    const uint64_t value = off_cpu ? totals.off_cpu_ns / 1000 : totals.samples;
    if (value == 0) continue;
    std::string line = profile.ProcessName(profile.key(id).pid);
    const std::vector<NamedFrame> frames = profile.StackFrames(id);
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
      line += ';';
      for (char c : frame->function) line += c == ';' ? ':' : c;
      if (frame->kernel) line += "_[k]";
    }
    auto [at, added] = line_of.try_emplace(line, lines.size());
    if (added) lines.emplace_back(std::move(line), 0);
    lines[at->second].second += value;
  }
  absl::StatusOr<std::unique_ptr<Output>> output = Output::Open(path);
  if (!output.ok()) return output.status();
  for (const auto& [line, value] : lines) (*output)->stream() << line << ' ' << value << '\n';
  return (*output)->Close();
}

absl::Status ExportPerfetto(const std::vector<std::string>& paths, format::TraceReader& trace,
                            analysis::PerfettoCompression compression, const std::string& path) {
  absl::StatusOr<std::unique_ptr<Output>> output = Output::Open(path);
  if (!output.ok()) return output.status();
  if (absl::Status status =
          analysis::ExportPerfetto(paths, trace, compression, (*output)->stream());
      !status.ok()) {
    return status;
  }
  return (*output)->Close();
}

}  // namespace

void AddExportCommand(CLI::App& app, ExportOptions& options) {
  CLI::App* command = app.add_subcommand(
      "export",
      "Write a trace for Perfetto, as a pprof profile, folded stacks (flame graphs) or JSON lines");
  command->add_option("--format", options.format, "perfetto, pprof, folded or json")
      ->required()
      ->check(CLI::IsMember({"perfetto", "pprof", "folded", "json"}));
  command->add_option("paths", options.paths, "Segment files or directories");
  AddCollectorOptions(command, options.collector, /*time_flags=*/true);
  command->add_option("-o,--output", options.output, "Output file (- for standard output)")
      ->required();
  command
      ->add_option("--stacks", options.stacks,
                   "folded: cpu (sample counts) or offcpu (microseconds off CPU)")
      ->check(CLI::IsMember({"cpu", "offcpu"}))
      ->capture_default_str();
  command
      ->add_option("--compress", options.compress,
                   "perfetto: deflate (default; Perfetto inflates it as it loads) or none")
      ->check(CLI::IsMember({"deflate", "none"}));
}

int RunExport(const ExportOptions& options) {
  if (!options.compress.empty() && options.format != "perfetto") {
    return Fail(absl::InvalidArgumentError(
        fmt::format("--compress applies to --format perfetto, not {}", options.format)));
  }
  std::unique_ptr<FetchedSegments> fetched;
  absl::StatusOr<std::vector<std::string>> sources =
      ResolveSources(options.paths, options.collector, &fetched);
  if (!sources.ok()) return Fail(sources.status());
  absl::StatusOr<std::unique_ptr<format::TraceReader>> trace = format::TraceReader::Open(*sources);
  if (!trace.ok()) return Fail(trace.status());
  if ((options.format == "pprof" || options.format == "perfetto") && options.output == "-") {
    return Fail(absl::InvalidArgumentError(
        fmt::format("{} is binary: name an output file with -o", options.format)));
  }
  absl::Status status;
  if (options.format == "perfetto") {
    status = ExportPerfetto(*sources, **trace,
                            options.compress == "none" ? analysis::PerfettoCompression::kNone
                                                       : analysis::PerfettoCompression::kDeflate,
                            options.output);
  } else if (options.format == "json") {
    status = ExportJson(**trace, options.output);
  } else {
    StackProfile profile;
    format::Record record;
    uint64_t first = 0, last = 0;
    while ((*trace)->Next(&record)) {
      if (first == 0) first = record.time_ns;
      last = record.time_ns;
      profile.Add(record);
    }
    PprofTimes times{.duration_ns = last - first, .sample_period_ns = 1'000'000'000 / 99};
    for (const format::SegmentSummary& summary : (*trace)->summaries()) {
      profile.AddSymbols(summary.symbols);
      const auto& config = summary.header.config();
      if (auto hz = config.find("sample_hz"); hz != config.end() && std::stoul(hz->second) > 0) {
        times.sample_period_ns = 1'000'000'000 / std::stoul(hz->second);
      }
      if (times.start_realtime_ns == 0 && summary.header.has_clock()) {
        const auto& clock = summary.header.clock();
        times.start_realtime_ns = clock.realtime_ns() + first - clock.monotonic_ns();
      }
    }
    status = options.format == "folded"
                 ? ExportFolded(profile, options.stacks == "offcpu", options.output)
                 : WritePprof(profile, times, options.output);
  }
  if (!status.ok()) return Fail(status);
  // Say so when what was exported is not the whole story.
  for (const format::SegmentSummary& summary : (*trace)->summaries()) {
    if (!summary.copy_of.empty()) {
      fmt::print(stderr, "tracectl: note: {} holds the same segment as {}: read once\n",
                 summary.path, summary.copy_of);
    }
    if (!summary.complete) {
      // A reading problem names its file already.
      std::string why = summary.problems.empty() ? "losses" : summary.problems.front();
      if (why.starts_with(summary.path + ": ")) why.erase(0, summary.path.size() + 2);
      fmt::print(stderr, "tracectl: warning: {} is incomplete ({})\n", summary.path, why);
    }
  }
  return kExitOk;
}

}  // namespace loupe::tracectl
