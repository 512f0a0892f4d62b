// The Perfetto export's cost: the CPU and elapsed time of exactly what
// `tracectl export --format perfetto` runs (the symbol tables, the pass over
// the events, the writer, the compressor's thread), with the output counted
// and dropped, and the bytes it writes per event.
//   perfetto_export_bench DIR [runs] [deflate|none]
#include <fmt/format.h>
#include <time.h>

#include <cstdlib>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string_view>

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

double Seconds(clockid_t clock) {
  timespec now;
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} SEGMENT_DIR [runs] [deflate|none]\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> paths = {argv[1]};
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string_view mode = argc > 3 ? argv[3] : "deflate";
  if (mode != "deflate" && mode != "none") {
    fmt::print(stderr, "compression: deflate or none, not {}\n", mode);
    return 2;
  }
  const auto compression = mode == "none" ? loupe::analysis::PerfettoCompression::kNone
                                          : loupe::analysis::PerfettoCompression::kDeflate;
  for (int run = 0; run < runs; ++run) {
    auto trace = loupe::format::TraceReader::Open(paths);
    if (!trace.ok()) {
      fmt::print(stderr, "{}\n", trace.status().ToString());
      return 1;
    }
    CountingBuffer counted;
    std::ostream out(&counted);
    const double cpu_start = Seconds(CLOCK_PROCESS_CPUTIME_ID);
    const double start = Seconds(CLOCK_MONOTONIC);
    if (absl::Status status = loupe::analysis::ExportPerfetto(paths, **trace, compression, out);
        !status.ok()) {
      fmt::print(stderr, "{}\n", status.ToString());
      return 1;
    }
    const double elapsed = Seconds(CLOCK_MONOTONIC) - start;
    const double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
    uint64_t events = 0;
    for (const auto& summary : (*trace)->summaries()) events += summary.records_read;
    const auto rate = [&](double seconds) { return static_cast<double>(events) / seconds / 1e6; };
    fmt::print(
        "perfetto export ({}): {} events, {:.2f} s CPU ({:.2f} M events/s), {:.2f} s elapsed "
        "({:.2f} M events/s), {:.1f} MB, {:.2f} bytes/event\n",
        mode, events, cpu, rate(cpu), elapsed, rate(elapsed),
        static_cast<double>(counted.bytes) / 1e6,
        static_cast<double>(counted.bytes) / static_cast<double>(events));
  }
  return 0;
}
