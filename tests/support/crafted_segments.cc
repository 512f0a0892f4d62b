#include "tests/support/crafted_segments.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <variant>

#include "daemon/format/block_layout.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/wire.h"
#include "tests/support/every_kind.h"

namespace loupe::testing {
namespace {

namespace fs = std::filesystem;
namespace layout = format::layout;
namespace wire = format::wire;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The body of a frame (the bytes inside Frame.<field>), or empty.
std::string BodyOf(std::string_view frame) {
  std::string payload;
  format::FrameDecompressor decompressor;
  if (!decompressor.Decompress(frame, format::kMaxDecompressedFrame, &payload).ok()) return {};
  wire::Cursor cursor(payload);
  uint64_t tag;
  std::string_view body;
  if (!cursor.ReadVarint(&tag) || !cursor.ReadLengthDelimited(&body)) return {};
  return std::string(body);
}

// An event block defining only `content` (already encoded block fields).
std::string EventFrame(uint64_t frame_number, std::string_view content) {
  std::string block;
  wire::AppendVarintField(&block, layout::kFrameNumber, frame_number);
  wire::AppendVarintField(&block, layout::kBaseTime, 1'000'000'000);
  block += content;
  return CompressFrame(layout::kFrameEvents, block);
}

std::string MiB(size_t bytes) { return fmt::format("{}m", bytes >> 20); }

}  // namespace

std::string WriteSmallSegment(const std::string& directory, const std::string& session) {
  format::WriterOptions options{.directory = directory, .session_id = session};
  options.block_flush_period_ns = 1'000'000;
  auto symbols = [] {
    v1::SymbolTable table;
    v1::SymbolTable::Address* address = table.add_addresses();
    address->set_pid(1);
    address->set_address(0x401000);
    address->add_frames()->set_function("main");
    return table;
  };
  auto writer = format::SegmentWriter::Create(options, {}, {}, symbols);
  if (!writer.ok()) return {};
  for (int block = 0; block < 4; ++block) {
    const uint64_t start = 1'000'000'000 + block * 10'000'000;
    for (const format::Record& record : EveryKind(start)) {
      if (std::holds_alternative<format::Loss>(record.payload)) continue;  // complete as written
      if (!(*writer)->Append(record).ok()) return {};
    }
    if (!(*writer)->Tick(start + 5'000'000).ok()) return {};
  }
  if (!(*writer)->Close().ok()) return {};
  return ReadAll((fs::path(directory) / (session + "-000000.loupe")).string());
}

std::vector<std::string> SplitFrames(std::string_view file) {
  if (file.size() < format::kSignatureSize) return {};
  std::vector<std::string> frames{std::string(file.substr(0, format::kSignatureSize))};
  for (size_t pos = format::kSignatureSize; pos < file.size();) {
    size_t size = 0;
    std::string error;
    if (format::ScanFrame(file.substr(pos), &size, &error) != format::FrameScan::kWhole) return {};
    frames.emplace_back(file.substr(pos, size));
    pos += size;
  }
  return frames;
}

std::string JoinFrames(const std::vector<std::string>& frames) {
  std::string file;
  for (const std::string& frame : frames) file += frame;
  return file;
}

std::string CompressFrame(uint32_t frame_field, std::string_view body) {
  std::string payload;
  wire::AppendBytesField(&payload, frame_field, body);
  std::string frame;
  auto compressor = format::FrameCompressor::Create(3);
  if (!compressor.ok() || !compressor->Compress(payload, &frame).ok()) return {};
  return frame;
}

std::vector<CraftedSegment> CraftBombs(std::string_view segment, size_t payload) {
  const std::vector<std::string> frames = SplitFrames(segment);
  if (frames.size() < 5) return {};
  // Keeps the signature and header; what follows is frame #1 on.
  const std::vector<std::string> head(frames.begin(), frames.begin() + 2);
  std::vector<CraftedSegment> out;
  auto add = [&](std::string name, std::vector<std::string> body, std::string what) {
    std::vector<std::string> file = head;
    file.insert(file.end(), body.begin(), body.end());
    out.push_back({fmt::format("{}-{}", name, MiB(payload)), JoinFrames(file), std::move(what)});
  };

  {  // Stacks of 512 frames, each frame one byte: 8 bytes apiece decoded.
    const size_t stacks = payload / (512 + 2);
    std::string content;
    wire::AppendVarintField(&content, layout::kFirstStackId, 1);
    std::string depths;
    for (size_t i = 0; i < stacks; ++i) wire::AppendVarint(&depths, 512);
    wire::AppendBytesField(&content, layout::kStackDepths, depths);
    wire::AppendBytesField(&content, layout::kStackFrameDeltas, std::string(stacks * 512, '\0'));
    add("stack-bomb", {EventFrame(1, content)},
        fmt::format("{} stacks of 512 one-byte frames in one event block", stacks));
  }
  {  // Frame after frame of long strings: each fits, together they pile up.
    constexpr size_t kString = 64 << 10;
    const size_t per_frame = std::max<size_t>(1, payload / kString);
    std::vector<std::string> body;
    for (uint64_t frame = 1; frame <= 8; ++frame) {
      std::string content;
      wire::AppendVarintField(&content, layout::kFirstStringId, 1 + (frame - 1) * per_frame);
      const std::string text(kString, static_cast<char>('a' + frame));
      for (size_t i = 0; i < per_frame; ++i) wire::AppendBytesField(&content, layout::kStrings, text);
      body.push_back(EventFrame(frame, content));
    }
    add("string-pile", std::move(body),
        fmt::format("8 event blocks of {} strings of 64 KiB", per_frame));
  }
  {  // Empty strings: two bytes each on the wire, a whole string object decoded.
    std::string content;
    wire::AppendVarintField(&content, layout::kFirstStringId, 1);
    for (size_t i = 0; i < payload / 2; ++i) content += std::string_view("\x22\x00", 2);
    add("empty-string-bomb", {EventFrame(1, content)},
        fmt::format("{} empty strings in one event block", payload / 2));
  }
  {  // Empty symbol addresses: two bytes each, a message object parsed.
    std::string table;
    for (size_t i = 0; i < payload / 2; ++i) table += std::string_view("\x12\x00", 2);
    wire::AppendVarintField(&table, layout::kFrameNumber, 1);
    add("symbol-bomb", {CompressFrame(layout::kFrameSymbols, table)},
        fmt::format("{} empty addresses in the symbol table", payload / 2));
  }
  {  // Empty trailer kind counts.
    std::string trailer;
    for (size_t i = 0; i < payload / 2; ++i) trailer += std::string_view("\x22\x00", 2);
    wire::AppendVarintField(&trailer, layout::kFrameNumber, 1);
    add("trailer-bomb", {CompressFrame(layout::kFrameTrailer, trailer)},
        fmt::format("{} empty kind counts in the trailer", payload / 2));
  }
  {  // Unknown fields (from a "newer writer") appended to the real header:
     // three bytes each, a kept unknown field parsed.
    std::string header = BodyOf(frames[1]);
    for (size_t i = 0; i < payload / 3; ++i) header += std::string_view("\xf8\x01\x00", 3);
    std::vector<std::string> file{frames[0], CompressFrame(layout::kFrameHeader, header)};
    file.insert(file.end(), frames.begin() + 2, frames.end());
    out.push_back({fmt::format("header-bomb-{}", MiB(payload)), JoinFrames(file),
                   fmt::format("{} unknown fields in the header", payload / 3)});
  }
  {  // A frame that claims `payload` bytes and holds three: a zstd header
     // with an 8-byte content size, one raw block, a checksum.
    std::string frame("\x28\xb5\x2f\xfd", 4);
    frame += '\xc4';  // content size in 8 bytes, a window byte, a checksum
    frame += '\x58';  // window 2^(10+11)
    for (int i = 0; i < 8; ++i) frame += static_cast<char>((uint64_t{payload} >> (8 * i)) & 0xff);
    frame += std::string_view("\x19\x00\x00", 3);  // last block, raw, 3 bytes
    frame += "abc";
    frame += std::string_view("\x00\x00\x00\x00", 4);
    add("size-lie", {frame}, fmt::format("a frame of 3 bytes claiming {}", payload));
  }
  return out;
}

std::vector<CraftedSegment> CraftReorderings(std::string_view segment) {
  const std::vector<std::string> frames = SplitFrames(segment);
  // signature, header, 4 blocks (#1..#4), symbols (#5), trailer (#6).
  if (frames.size() != 8) return {};
  std::vector<CraftedSegment> out;
  std::vector<std::string> file = frames;
  file.insert(file.begin() + 4, frames[3]);  // #2 twice
  out.push_back({"duplicated", JoinFrames(file), "event block #2 written twice"});
  file = frames;
  std::swap(file[3], file[4]);  // #3 before #2
  out.push_back({"swapped", JoinFrames(file), "event blocks #2 and #3 swapped"});
  file = frames;
  file.erase(file.begin() + 4);  // no #3
  out.push_back({"dropped", JoinFrames(file), "event block #3 left out"});
  file = frames;
  file.erase(file.begin() + 5);  // no #4, the last block
  out.push_back({"dropped-last", JoinFrames(file), "the last event block (#4) left out"});
  return out;
}

}  // namespace loupe::testing
