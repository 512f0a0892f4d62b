// Perfetto's compressed form of a trace, as its own tracing service writes
// it when a config asks for deflate: batches of packets, each deflated
// (zlib format) into one TracePacket.compressed_packets. Perfetto's trace
// processor and UI inflate them as they load, in every version since 2019
// (the zstd form is new in v58, so deflate is the one that opens anywhere).
// ISA-L's igzip at its fastest level deflates our packets at 400+ MB/s,
// twice libdeflate's fastest and 5x zlib's, to within 6 % of their size
// (docs/performance.md). A batch is compressed on a thread of its own while
// the next one is built, one batch at most in flight, so memory stays two
// batches.
#ifndef LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_
#define LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_

#include <cstdint>
#include <future>
#include <ostream>
#include <string>

namespace loupe::analysis {

class PerfettoDeflate {
 public:
  // Perfetto asks for each compressed packet, framing included, to stay
  // under 512 KiB; a batch is this much of whole packets (the largest
  // packet we write, a scheduling bundle, is tens of KiB) and deflate
  // grows incompressible input by a few bytes per 64 KiB.
  static constexpr size_t kBatchBytes = 384 << 10;

  explicit PerfettoDeflate(std::ostream& out);
  ~PerfettoDeflate();
  PerfettoDeflate(const PerfettoDeflate&) = delete;
  PerfettoDeflate& operator=(const PerfettoDeflate&) = delete;

  // Takes `packets` (whole Trace.packet fields) to compress, leaving it empty.
  void Write(std::string& packets);
  // Writes the batch in flight.
  void Flush();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  std::ostream& out_;
  std::string level_buffer_;  // igzip's hash tables; used by the batch in flight only
  std::future<std::string> in_flight_;  // a Trace.packet, compressed
  uint64_t bytes_written_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_
