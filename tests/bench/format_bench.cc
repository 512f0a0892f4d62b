// Encode + zstd + write throughput of the segment writer, bytes per event on
// disk, and read + zstd + decode throughput of the segment reader, for the
// synthetic mix (tools/synthetic/synthetic_trace.h). Runs on one core: the
// writer and the reader are single-threaded.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe {
namespace {

constexpr size_t kEvents = 2'000'000;

// Generated once per shape, outside the timed loop. The generator owns the
// storage behind the records' views, so it lives as long as they do.
const std::vector<format::Record>& Mix(bool bursty) {
  struct Generated {
    explicit Generated(bool bursty) : trace(synthetic::Options{.bursty = bursty}) {
      records.reserve(kEvents);
      for (size_t i = 0; i < kEvents; ++i) records.push_back(trace.Next());
    }
    synthetic::Trace trace;
    std::vector<format::Record> records;
  };
  static Generated* generated[2] = {};
  if (generated[bursty] == nullptr) generated[bursty] = new Generated(bursty);
  return generated[bursty]->records;
}

std::string BenchDirectory() {
  return std::filesystem::temp_directory_path() / ("loupe-bench-" + std::to_string(getpid()));
}

std::unique_ptr<format::SegmentWriter> WriteMix(const std::string& dir,
                                                const std::vector<format::Record>& records,
                                                int zstd_level, benchmark::State& state) {
  format::WriterOptions options{.directory = dir, .session_id = "bench"};
  options.zstd_level = zstd_level;
  options.max_total_size = 64ull << 30;
  auto writer = format::SegmentWriter::Create(options, {});
  if (!writer.ok()) {
    state.SkipWithError("cannot create the writer");
    return nullptr;
  }
  for (const format::Record& record : records) {
    if (!(*writer)->Append(record).ok()) state.SkipWithError("append failed");
  }
  if (!(*writer)->Close().ok()) state.SkipWithError("close failed");
  return std::move(*writer);
}

void BM_WriteSegments(benchmark::State& state) {
  const std::vector<format::Record>& records = Mix(state.range(1) != 0);
  const std::string dir = BenchDirectory();
  uint64_t bytes = 0, events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
    auto writer = WriteMix(dir, records, static_cast<int>(state.range(0)), state);
    if (writer == nullptr) break;
    bytes += writer->stats().bytes_written;
    events += records.size();
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / static_cast<double>(events);
}
// Args: zstd level, bursty mix (1) or every event drawn independently (0).
BENCHMARK(BM_WriteSegments)
    ->ArgNames({"zstd_level", "bursty"})
    ->ArgsProduct({{1, 3, 6}, {1, 0}})
    ->Unit(benchmark::kMillisecond);

// Reading the segments of the bursty mix at the default level: file reads,
// zstd, checksums and block decoding, record by record.
void BM_ReadSegments(benchmark::State& state) {
  const std::string dir = BenchDirectory();
  std::filesystem::remove_all(dir);
  auto writer = WriteMix(dir, Mix(true), 3, state);
  if (writer == nullptr) return;
  const std::vector<std::string> paths = writer->sealed_paths();
  uint64_t events = 0;
  for (auto _ : state) {
    for (const std::string& path : paths) {
      auto reader = format::SegmentReader::Open(path);
      if (!reader.ok()) {
        state.SkipWithError("cannot open a segment");
        break;
      }
      format::Record record;
      while ((*reader)->Next(&record)) ++events;
    }
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_ReadSegments)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loupe

BENCHMARK_MAIN();
