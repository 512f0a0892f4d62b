// The session pipeline alone on one core: ring bytes recorded from a real
// session (tracectl attach --ring-capture FILE, embedded mode) replayed
// through decode, reorder, off-CPU derivation, encode, zstd and write,
// exactly as drained. Symbolization is left out (it needs the live
// processes and runs on its own thread). Each repeat is one pipeline fed
// the capture PASSES times over, each pass later by the capture's length
// (times and loss counters shifted), so it prints both what a fresh
// session pays (the first pass: its buffers and pages are new) and what a
// running one does (the passes after it). Rates are events per second of
// CPU; bytes per event written. With KEEP_DIR, the last repeat's segments
// are kept there, to compare the trace across changes.
//   ./build/tests/bench/pipeline_bench CAPTURE [REPEATS [KEEP_DIR]]   (PASSES=5 in the environment)
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

// The capture played `passes` times, each pass `span_ns` after the one
// before: one long session's worth of drains, with loss counters that only
// grow, as the kernel's do.
std::vector<RingBatch> Repeated(const std::vector<RingBatch>& batches, int passes,
                                uint64_t span_ns) {
  std::vector<RingBatch> out;
  const loupe::bpf::BpfCounters& last = batches.back().counters;
  for (int pass = 0; pass < passes; ++pass) {
    for (RingBatch batch : batches) {
      for (std::vector<uint8_t>& bytes : batch.records) {
        loupe_record_header header;
        if (bytes.size() < sizeof header) continue;
        std::memcpy(&header, bytes.data(), sizeof header);
        header.time_ns += static_cast<uint64_t>(pass) * span_ns;
        std::memcpy(bytes.data(), &header, sizeof header);
      }
      for (size_t i = 0; i < batch.counters.size(); ++i) {
        batch.counters[i] += static_cast<uint64_t>(pass) * last[i];
      }
      out.push_back(std::move(batch));
    }
  }
  return out;
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
  const char* passes_env = std::getenv("PASSES");
  const int passes = passes_env != nullptr ? std::max(2, std::atoi(passes_env)) : 5;
  uint64_t first_time = LatestTime(batches->front(), 0), last_time = first_time;
  for (const RingBatch& batch : *batches) last_time = LatestTime(batch, last_time);
  const uint64_t span_ns = last_time - first_time + 1'000'000;
  const size_t drains_per_pass = batches->size();
  fmt::print("{} passes a repeat; first: a fresh pipeline, then: the passes after it\n", passes);
  fmt::print("{:>8} {:>12} {:>18} {:>18} {:>14} {:>12}\n", "repeat", "events",
             "M ev/s cpu, first", "M ev/s cpu, then", "M ev/s wall", "bytes/event");
  for (int repeat = 0; repeat < repeats; ++repeat) {
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
    PipelineOptions options;
    options.writer.directory = out.string();
    options.writer.session_id = "bench";
    options.symbolize = false;
    std::vector<RingBatch> replay = Repeated(*batches, passes, span_ns);
    const Targets targets = TargetsOf(*batches);
    std::vector<uint64_t> drained_at;
    uint64_t latest = first_time;
    for (const RingBatch& batch : replay) drained_at.push_back(latest = LatestTime(batch, latest));
    const uint64_t cpu_start = Clock(CLOCK_PROCESS_CPUTIME_ID), wall_start = Clock(CLOCK_MONOTONIC);
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(
        options, targets, loupe::v1::SegmentHeader(), &probe_names, log, first_time);
    if (!pipeline.ok()) {
      fmt::print(stderr, "{}\n", std::string(pipeline.status().message()));
      return 1;
    }
    Pipeline& p = **pipeline;
    ReplaySource source(std::move(replay), [&p](std::span<const uint8_t> bytes) { p.OnRecord(bytes); });
    uint64_t cpu_first_pass = 0, events_first_pass = 0;
    for (size_t i = 0; !source.exhausted(); ++i) {
      if (!source.Drain().ok()) return 1;
      p.Cycle(drained_at[i], source.ReadCounters(), /*final=*/false, drained_at[i]);
      if (i + 1 == drains_per_pass) {
        cpu_first_pass = Clock(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
        events_first_pass = p.stats().events;
      }
    }
    source.Detach();
    p.Cycle(latest, source.ReadCounters(), /*final=*/true, latest);
    if (absl::Status closed = p.Close(0); !closed.ok()) {
      fmt::print(stderr, "{}\n", std::string(closed.message()));
      return 1;
    }
    const uint64_t cpu_ns = Clock(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
    const double wall_s = (Clock(CLOCK_MONOTONIC) - wall_start) / 1e9;
    const PipelineStats stats = p.stats();
    uint64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(out)) bytes += entry.file_size();
    fmt::print("{:>8} {:>12} {:>18.2f} {:>18.2f} {:>14.2f} {:>12.2f}\n", repeat + 1, stats.events,
               events_first_pass / (cpu_first_pass / 1e3),
               (stats.events - events_first_pass) / ((cpu_ns - cpu_first_pass) / 1e3),
               stats.events / wall_s / 1e6,
               static_cast<double>(bytes) / std::max<uint64_t>(1, stats.events));
  }
  if (argc <= 3) std::filesystem::remove_all(out);
  return 0;
}
