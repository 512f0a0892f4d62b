// The Perfetto export's cost: the CPU time of exactly what `tracectl export
// --format perfetto` runs (the symbol tables, the pass over the events, the writer), with
// the output counted and dropped, and the bytes it writes per event.
//   perfetto_export_bench DIR [runs]
#include <fmt/format.h>
#include <time.h>

#include <cstdlib>
#include <memory>
#include <ostream>
#include <streambuf>

#include "analysis/perfetto_export.h"
#include "daemon/format/trace_reader.h"

namespace {

// Counts what is written, keeps nothing.
class CountingBuffer : public std::streambuf {
 public:
  uint64_t bytes = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<uint64_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    ++bytes;
    return c;
  }
};

double CpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} SEGMENT_DIR [runs]\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> paths = {argv[1]};
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  for (int run = 0; run < runs; ++run) {
    auto trace = loupe::format::TraceReader::Open(paths);
    if (!trace.ok()) {
      fmt::print(stderr, "{}\n", trace.status().ToString());
      return 1;
    }
    CountingBuffer counted;
    std::ostream out(&counted);
    const double start = CpuSeconds();
    if (absl::Status status = loupe::analysis::ExportPerfetto(paths, **trace, out); !status.ok()) {
      fmt::print(stderr, "{}\n", status.ToString());
      return 1;
    }
    const double seconds = CpuSeconds() - start;
    uint64_t events = 0;
    for (const auto& summary : (*trace)->summaries()) events += summary.records_read;
    fmt::print("perfetto export: {} events, {:.2f} s CPU, {:.2f} M events/s, {:.1f} MB, {:.2f} bytes/event\n",
               events, seconds, static_cast<double>(events) / seconds / 1e6,
               static_cast<double>(counted.bytes) / 1e6,
               static_cast<double>(counted.bytes) / static_cast<double>(events));
  }
  return 0;
}
