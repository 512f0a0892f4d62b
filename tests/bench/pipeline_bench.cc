// The session pipeline alone on one core: ring bytes recorded from a real
// session (tracectl attach --ring-capture FILE, embedded mode) replayed
// through decode, reorder, off-CPU derivation, encode, zstd and write,
// exactly as drained. Symbolization is left out (it needs the live
// processes and runs on its own thread). Prints events per second of CPU
// and of wall time, and bytes per event written. With KEEP_DIR, the last
// repeat's segments are kept there, to compare the trace across changes.
//   ./build/tests/bench/pipeline_bench CAPTURE [REPEATS [KEEP_DIR]]
#include <fmt/format.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "daemon/session/pipeline.h"
#include "daemon/session/replay_source.h"
#include "daemon/session/ring_capture.h"
#include "shared/records.h"

namespace {

using namespace loupe::session;

uint64_t Clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

// The capture does not list the targets: they are the processes whose
// threads were sampled or had their stacks taken at switch-out.
Targets TargetsOf(const std::vector<RingBatch>& batches) {
  std::set<uint32_t> tgids;
  for (const RingBatch& batch : batches) {
    for (const std::vector<uint8_t>& bytes : batch.records) {
      loupe_record_header header;
      if (bytes.size() < sizeof header) continue;
      std::memcpy(&header, bytes.data(), sizeof header);
      if (header.type == LOUPE_REC_CPU_SAMPLE && bytes.size() >= offsetof(loupe_cpu_sample, frames)) {
        loupe_cpu_sample sample;
        std::memcpy(&sample, bytes.data(), offsetof(loupe_cpu_sample, frames));
        tgids.insert(sample.tgid);
      } else if (header.type == LOUPE_REC_SCHED_SWITCH &&
                 bytes.size() >= offsetof(loupe_sched_switch, frames)) {
        loupe_sched_switch change;
        std::memcpy(&change, bytes.data(), offsetof(loupe_sched_switch, frames));
        if (change.prev_comm[0] == '\0' && change.prev_tgid != 0) tgids.insert(change.prev_tgid);
      }
    }
  }
  std::map<uint32_t, ProcessIdentity> processes;
  for (uint32_t tgid : tgids) {
    processes[tgid] = ProcessIdentity{.pid = tgid, .ns_pid = tgid, .ppid = 1, .name = "replayed"};
  }
  return Targets(std::move(processes));
}

uint64_t LatestTime(const RingBatch& batch, uint64_t previous) {
  for (const std::vector<uint8_t>& bytes : batch.records) {
    loupe_record_header header;
    if (bytes.size() < sizeof header) continue;
    std::memcpy(&header, bytes.data(), sizeof header);
    previous = std::max<uint64_t>(previous, header.time_ns);
  }
  return previous;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} CAPTURE [REPEATS [KEEP_DIR]]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::vector<RingBatch>> batches = ReadRingCapture(argv[1]);
  if (!batches.ok()) {
    fmt::print(stderr, "{}: {}\n", argv[1], std::string(batches.status().message()));
    return 1;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const std::filesystem::path out = argc > 3 ? std::filesystem::path(argv[3])
                                             : std::filesystem::temp_directory_path() /
                                                   "loupe-pipeline-bench";
  auto log = std::make_shared<spdlog::logger>("bench", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::vector<std::string> probe_names;
  size_t records = 0;
  for (const RingBatch& batch : *batches) records += batch.records.size();
  fmt::print("{}: {} ring records in {} drains\n", argv[1], records, batches->size());
  fmt::print("{:>8} {:>12} {:>14} {:>14} {:>12}\n", "repeat", "events", "M ev/s (cpu)",
             "M ev/s (wall)", "bytes/event");
  for (int repeat = 0; repeat < repeats; ++repeat) {
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
    PipelineOptions options;
    options.writer.directory = out.string();
    options.writer.session_id = "bench";
    options.symbolize = false;
    std::vector<RingBatch> copy = *batches;
    const uint64_t first = LatestTime(copy.front(), 0);
    const uint64_t cpu_start = Clock(CLOCK_PROCESS_CPUTIME_ID), wall_start = Clock(CLOCK_MONOTONIC);
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(
        options, TargetsOf(copy), loupe::v1::SegmentHeader(), &probe_names, log, first);
    if (!pipeline.ok()) {
      fmt::print(stderr, "{}\n", std::string(pipeline.status().message()));
      return 1;
    }
    Pipeline& p = **pipeline;
    std::vector<uint64_t> drained_at;
    uint64_t latest = first;
    for (const RingBatch& batch : copy) drained_at.push_back(latest = LatestTime(batch, latest));
    ReplaySource source(std::move(copy), [&p](std::span<const uint8_t> bytes) { p.OnRecord(bytes); });
    for (size_t i = 0; !source.exhausted(); ++i) {
      if (!source.Drain().ok()) return 1;
      p.Cycle(drained_at[i], source.ReadCounters(), /*final=*/false, drained_at[i]);
    }
    source.Detach();
    p.Cycle(latest, source.ReadCounters(), /*final=*/true, latest);
    if (absl::Status closed = p.Close(0); !closed.ok()) {
      fmt::print(stderr, "{}\n", std::string(closed.message()));
      return 1;
    }
    const double cpu_s = (Clock(CLOCK_PROCESS_CPUTIME_ID) - cpu_start) / 1e9;
    const double wall_s = (Clock(CLOCK_MONOTONIC) - wall_start) / 1e9;
    const PipelineStats stats = p.stats();
    uint64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(out)) bytes += entry.file_size();
    fmt::print("{:>8} {:>12} {:>14.2f} {:>14.2f} {:>12.2f}\n", repeat + 1, stats.events,
               stats.events / cpu_s / 1e6, stats.events / wall_s / 1e6,
               static_cast<double>(bytes) / std::max<uint64_t>(1, stats.events));
  }
  if (argc <= 3) std::filesystem::remove_all(out);
  return 0;
}
