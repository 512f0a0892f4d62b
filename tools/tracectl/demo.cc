#include "tools/tracectl/demo.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

#include "daemon/format/segment_writer.h"
#include "tools/synthetic/synthetic_trace.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {

void AddDemoCommand(CLI::App& app, DemoOptions& options) {
  CLI::App* demo = app.add_subcommand("demo", "Write a trace of a built-in synthetic workload");
  demo->add_option("-o,--output", options.output, "Directory for the segments")
      ->capture_default_str();
  demo->add_option("--events", options.events, "How many events")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}))
      ->capture_default_str();
  demo->add_option("--max-file-size", options.max_file_size, "Rotate segments at this size")
      ->capture_default_str();
}

int RunDemo(const DemoOptions& options) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  synthetic::Trace trace({.start_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 +
                                       static_cast<uint64_t>(now.tv_nsec)});

  format::WriterOptions writer_options{.directory = options.output,
                                       .session_id = fmt::format("demo-{}", getpid())};
  writer_options.max_file_size = options.max_file_size;
  writer_options.max_total_size = std::max<uint64_t>(1ull << 30, 2 * options.max_file_size);
  v1::SegmentHeader header;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  header.set_host(host);
  header.set_writer_version("tracectl demo");
  (*header.mutable_config())["workload"] = "synthetic";
  const std::vector<format::Record> identity = trace.Identity();
  auto writer =
      format::SegmentWriter::Create(writer_options, header, [&identity](format::SegmentWriter& w) {
        for (const format::Record& record : identity) w.AppendPreamble(record);
      });
  if (!writer.ok()) return Fail(writer.status());

  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < options.events; ++i) {
    if (absl::Status status = (*writer)->Append(trace.Next()); !status.ok()) return Fail(status);
  }
  if (absl::Status status = (*writer)->Close(); !status.ok()) return Fail(status);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const format::WriterStats& stats = (*writer)->stats();
  fmt::print("wrote {} events in {} segment(s) to {}/ ({:.2f} bytes/event, {:.1f} M events/s)\n",
             stats.events, stats.segments_sealed, options.output,
             static_cast<double>(stats.bytes_written) / static_cast<double>(stats.events),
             static_cast<double>(stats.events) / seconds / 1e6);
  return kExitOk;
}

}  // namespace loupe::tracectl
