#include "analysis/perfetto_deflate.h"

#include <isa-l/igzip_lib.h>

#include <utility>

#include "daemon/format/wire.h"

namespace loupe::analysis {
namespace {

constexpr uint32_t kPacket = 1;              // Trace
constexpr uint32_t kCompressedPackets = 50;  // TracePacket

// Of the sizes igzip's stateless call accepts at level 1, the one it is
// fastest with.
constexpr size_t kLevelBufferBytes = ISAL_DEF_LVL1_DEFAULT;

// A length-delimited field's tag and length; its bytes follow.
void AppendFieldHeader(std::string* out, uint32_t field, size_t length) {
  format::wire::AppendVarint(out, format::wire::Tag(field, format::wire::kLengthDelimited));
  format::wire::AppendVarint(out, length);
}

// The zlib stream of `batch`, or nothing if it does not fit in `capacity`.
std::string Deflate(std::string& level_buffer, const std::string& batch, size_t capacity) {
  std::string deflated(capacity, '\0');
  isal_zstream stream;
  isal_deflate_stateless_init(&stream);
  stream.level = 1;
  stream.level_buf = reinterpret_cast<uint8_t*>(level_buffer.data());
  stream.level_buf_size = static_cast<uint32_t>(level_buffer.size());
  stream.gzip_flag = IGZIP_ZLIB;
  stream.end_of_stream = 1;
  stream.flush = NO_FLUSH;
  stream.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(batch.data()));
  stream.avail_in = static_cast<uint32_t>(batch.size());
  stream.next_out = reinterpret_cast<uint8_t*>(deflated.data());
  stream.avail_out = static_cast<uint32_t>(deflated.size());
  if (isal_deflate_stateless(&stream) != COMP_OK) return {};
  deflated.resize(stream.total_out);
  return deflated;
}

}  // namespace

PerfettoDeflate::Output PerfettoDeflate::Compress(std::string& level_buffer, std::string batch) {
  // Room for the packet's two tags and lengths (2 + 3 bytes, 1 + 3), under the limit.
  constexpr size_t kFraming = 9;
  std::string deflated = Deflate(level_buffer, batch, kMaxCompressedPacket - kFraming - 1);
  if (deflated.empty()) return {.framing = {}, .content = std::move(batch)};
  std::string field;
  AppendFieldHeader(&field, kCompressedPackets, deflated.size());
  Output output;
  AppendFieldHeader(&output.framing, kPacket, field.size() + deflated.size());
  output.framing += field;
  output.content = std::move(deflated);
  return output;
}

PerfettoDeflate::PerfettoDeflate(std::ostream& out)
    : out_(out), level_buffer_(kLevelBufferBytes, '\0') {}

PerfettoDeflate::~PerfettoDeflate() {
  if (in_flight_.valid()) in_flight_.wait();
}

void PerfettoDeflate::Write(std::string& packets) {
  if (packets.empty()) return;
  Flush();
  in_flight_bytes_ = packets.size();
  // Deferred (compressed at the next Flush, on this thread) only when no
  // thread can be started.
  in_flight_ = std::async(std::launch::async | std::launch::deferred,
                          [this, batch = std::move(packets)]() mutable {
                            return Compress(level_buffer_, std::move(batch));
                          });
  packets.clear();
}

void PerfettoDeflate::Flush() {
  if (!in_flight_.valid()) return;
  const Output output = in_flight_.get();
  in_flight_bytes_ = 0;
  for (const std::string* part : {&output.framing, &output.content}) {
    out_.write(part->data(), static_cast<std::streamsize>(part->size()));
    bytes_written_ += part->size();
  }
}

}  // namespace loupe::analysis
