// Perfetto's compressed form of a trace, as its own tracing service writes
// it when a config asks for deflate: batches of packets, each deflated
// (zlib format) into one TracePacket.compressed_packets. Perfetto's trace
// processor and UI inflate them as they load, in every version since 2019
// (the zstd form is new in v58, so deflate is the one that opens anywhere).
// ISA-L's igzip because it is the fastest deflate Debian has, for a few
// percent more bytes (docs/performance.md). A batch is compressed on a
// thread of its own while the next one is built, one at most in flight, so
// the export takes little longer than without compression.
#ifndef LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_
#define LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_

#include <cstdint>
#include <future>
#include <ostream>
#include <string>

namespace loupe::analysis {

class PerfettoDeflate {
 public:
  // A batch is passed on once this much, in whole packets, is pending.
  static constexpr size_t kBatchBytes = 384 << 10;
  // Perfetto asks for each compressed packet, framing included, to stay
  // under this; a batch that would not (incompressible content, or one
  // packet of near this size) is written as its packets, uncompressed.
  static constexpr size_t kMaxCompressedPacket = 512 << 10;

  explicit PerfettoDeflate(std::ostream& out);
  // Waits for the batch in flight without writing it: Flush writes
  // everything, and is skipped only on the way out of an error.
  ~PerfettoDeflate();
  PerfettoDeflate(const PerfettoDeflate&) = delete;
  PerfettoDeflate& operator=(const PerfettoDeflate&) = delete;

  // Takes `packets` (whole Trace.packet fields) to compress, leaving it empty.
  void Write(std::string& packets);
  // The batch in flight, written: the trace's end must not wait for a next batch.
  void Flush();

  // The batch in flight counts uncompressed until it is written.
  uint64_t bytes_written() const { return bytes_written_ + in_flight_bytes_; }

 private:
  // What a batch becomes: a compressed packet's framing, then its content.
  struct Output {
    std::string framing;
    std::string content;
  };
  static Output Compress(std::string& level_buffer, std::string batch);

  std::ostream& out_;
  std::string level_buffer_;  // igzip's hash tables; used by the batch in flight only
  std::future<Output> in_flight_;
  uint64_t in_flight_bytes_ = 0;
  uint64_t bytes_written_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_DEFLATE_H_
