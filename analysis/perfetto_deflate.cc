#include "analysis/perfetto_deflate.h"

#include <isa-l/igzip_lib.h>

#include <utility>

#include "daemon/format/wire.h"

namespace loupe::analysis {
namespace {

constexpr uint32_t kPacket = 1;              // Trace
constexpr uint32_t kCompressedPackets = 50;  // TracePacket

// The batch as one compressed_packets packet, framed as a Trace.packet; the
// batch as it is if ISA-L refuses it (it cannot, with this output buffer,
// and the packets are then still a valid trace).
std::string Compress(std::string& level_buffer, const std::string& packets) {
  // Stored blocks at worst: a few bytes per 64 KiB, a header, the zlib frame.
  std::string deflated(packets.size() + packets.size() / 64 + ISAL_DEF_MAX_HDR_SIZE + 64, '\0');
  isal_zstream stream;
  isal_deflate_stateless_init(&stream);
  stream.level = 1;
  stream.level_buf = reinterpret_cast<uint8_t*>(level_buffer.data());
  stream.level_buf_size = static_cast<uint32_t>(level_buffer.size());
  stream.gzip_flag = IGZIP_ZLIB;
  stream.end_of_stream = 1;
  stream.flush = NO_FLUSH;
  stream.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(packets.data()));
  stream.avail_in = static_cast<uint32_t>(packets.size());
  stream.next_out = reinterpret_cast<uint8_t*>(deflated.data());
  stream.avail_out = static_cast<uint32_t>(deflated.size());
  if (isal_deflate_stateless(&stream) != COMP_OK) return packets;
  deflated.resize(stream.total_out);
  std::string packet;
  format::wire::AppendBytesField(&packet, kCompressedPackets, deflated);
  std::string framed;
  format::wire::AppendBytesField(&framed, kPacket, packet);
  return framed;
}

}  // namespace

PerfettoDeflate::PerfettoDeflate(std::ostream& out)
    : out_(out), level_buffer_(ISAL_DEF_LVL1_DEFAULT, '\0') {}

PerfettoDeflate::~PerfettoDeflate() { Flush(); }

void PerfettoDeflate::Write(std::string& packets) {
  if (packets.empty()) return;
  Flush();
  // Deferred (compressed at the next Flush, on this thread) only when no
  // thread can be started.
  in_flight_ = std::async(std::launch::async | std::launch::deferred,
                          [this, batch = std::move(packets)] {
                            return Compress(level_buffer_, batch);
                          });
  packets.clear();
}

void PerfettoDeflate::Flush() {
  if (!in_flight_.valid()) return;
  const std::string framed = in_flight_.get();
  out_.write(framed.data(), static_cast<std::streamsize>(framed.size()));
  bytes_written_ += framed.size();
}

}  // namespace loupe::analysis
