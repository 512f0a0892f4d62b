// The compressor alone, on packets of every kind of content: what a reader
// inflates is the packets given, in order, and no compressed packet reaches
// Perfetto's 512 KiB.
#include "analysis/perfetto_deflate.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "daemon/format/wire.h"
#include "perfetto_decoder.h"

namespace loupe::analysis {
namespace {

// `bytes` of Trace.packet fields, each holding `size` bytes of `fill`.
template <typename Fill>
std::string Packets(size_t bytes, size_t size, Fill fill) {
  std::string packets;
  while (packets.size() < bytes) {
    std::string payload(size, '\0');
    for (char& c : payload) c = fill();
    format::wire::AppendBytesField(&packets, 1, payload);
  }
  return packets;
}

struct Read {
  std::string packets;  // as a reader sees them, compressed ones inflated
  size_t compressed = 0, largest_compressed = 0;
  bool ok = true;
};

Read ReadBack(const std::string& trace) {
  Read read;
  format::wire::Cursor cursor(trace);
  while (!cursor.empty()) {
    const size_t start = trace.size() - cursor.remaining();
    uint64_t tag;
    std::string_view packet;
    if (!cursor.ReadVarint(&tag) || tag != 0x0a || !cursor.ReadLengthDelimited(&packet)) {
      read.ok = false;
      return read;
    }
    const size_t framed = trace.size() - cursor.remaining() - start;
    format::wire::Cursor fields(packet);
    uint64_t field;
    std::string_view deflated;
    if (!packet.starts_with("\x92\x03") || !fields.ReadVarint(&field) ||
        !fields.ReadLengthDelimited(&deflated) || !fields.empty()) {
      read.packets.append(trace, start, framed);
      continue;
    }
    ++read.compressed;
    read.largest_compressed = std::max(read.largest_compressed, framed);
    const std::optional<std::string> inflated = testing::Inflate(deflated);
    if (!inflated) {
      read.ok = false;
      return read;
    }
    read.packets += *inflated;
  }
  return read;
}

// Writes `batches`, one Write each, and reads the output back.
Read RoundTrip(const std::vector<std::string>& batches, std::string* out_bytes = nullptr) {
  std::ostringstream out;
  {
    PerfettoDeflate deflate(out);
    for (std::string batch : batches) {
      const size_t size = batch.size();
      deflate.Write(batch);
      EXPECT_TRUE(batch.empty());
      // The batch before is written by now; this one counts uncompressed.
      EXPECT_EQ(deflate.bytes_written(), out.str().size() + size);
    }
    deflate.Flush();
    EXPECT_EQ(deflate.bytes_written(), out.str().size());
  }
  if (out_bytes != nullptr) *out_bytes = out.str();
  return ReadBack(out.str());
}

TEST(PerfettoDeflateTest, CompressibleBatchesInflateToThePacketsInOrder) {
  int n = 0;
  const std::vector<std::string> batches = {
      Packets(PerfettoDeflate::kBatchBytes, 40, [&] { return static_cast<char>('a' + n++ % 7); }),
      Packets(1000, 10, [&] { return static_cast<char>(n++ % 3); }),
      Packets(PerfettoDeflate::kBatchBytes, 300, [&] { return static_cast<char>(n++ / 64); })};
  std::string out;
  const Read read = RoundTrip(batches, &out);
  ASSERT_TRUE(read.ok);
  EXPECT_EQ(read.compressed, 3u);
  EXPECT_TRUE(read.packets == batches[0] + batches[1] + batches[2]);
  EXPECT_LT(out.size(), read.packets.size() / 4);
}

// Random bytes do not deflate: a batch of them goes out as its packets
// (the largest packet Loupe writes is far smaller, but the bound holds
// whatever the content), and the batches around it stay compressed.
TEST(PerfettoDeflateTest, ABatchThatWouldNotFitUnder512KiBIsWrittenUncompressed) {
  std::mt19937 random(7);
  auto noise = [&] { return static_cast<char>(random()); };
  int n = 0;
  auto text = [&] { return static_cast<char>('a' + n++ % 5); };
  const std::vector<std::string> batches = {
      Packets(100'000, 50, text),
      Packets(PerfettoDeflate::kMaxCompressedPacket, 4096, noise),  // many packets
      Packets(1, 700 << 10, noise),                                 // one packet
      Packets(100'000, 50, text)};
  std::string out;
  const Read read = RoundTrip(batches, &out);
  ASSERT_TRUE(read.ok);
  EXPECT_EQ(read.compressed, 2u);
  EXPECT_LT(read.largest_compressed, PerfettoDeflate::kMaxCompressedPacket);
  EXPECT_TRUE(read.packets == batches[0] + batches[1] + batches[2] + batches[3]);
}

// Random bytes just under the limit still deflate (to a little more than
// they are) and fit: the framing is counted.
TEST(PerfettoDeflateTest, IncompressibleBatchesUnderTheLimitStayUnderItCompressed) {
  std::mt19937 random(11);
  const std::vector<std::string> batches = {
      Packets(PerfettoDeflate::kBatchBytes, 1000, [&] { return static_cast<char>(random()); })};
  const Read read = RoundTrip(batches);
  ASSERT_TRUE(read.ok);
  EXPECT_EQ(read.compressed, 1u);
  EXPECT_LT(read.largest_compressed, PerfettoDeflate::kMaxCompressedPacket);
  EXPECT_TRUE(read.packets == batches[0]);
}

TEST(PerfettoDeflateTest, NothingWrittenWritesNothing) {
  std::string out;
  const Read read = RoundTrip({"", ""}, &out);
  EXPECT_TRUE(read.ok);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace loupe::analysis
