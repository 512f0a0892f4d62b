// Writes seed inputs for the fuzz targets with the real writer: whole
// segments, cut ones, and bare event blocks.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "daemon/format/block_encoder.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/wire.h"
#include "tests/support/every_kind.h"
#include "tools/synthetic/synthetic_trace.h"

namespace fs = std::filesystem;
using namespace loupe;

namespace {

void Write(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const fs::path segments = argv[1], blocks = argv[2];
  fs::create_directories(segments);
  fs::create_directories(blocks);
  const fs::path scratch = segments / "scratch";
  fs::remove_all(scratch);

  format::WriterOptions options{.directory = scratch.string(), .session_id = "seed"};
  options.block_flush_period_ns = 1'000'000;
  auto writer = format::SegmentWriter::Create(options, {});
  if (!writer.ok()) return 1;
  for (int block = 0; block < 3; ++block) {
    const uint64_t start = 1'000'000'000 + block * 10'000'000;
    for (const format::Record& record : testing::EveryKind(start)) {
      if (!(*writer)->Append(record).ok()) return 1;
    }
    if (!(*writer)->Tick(start + 5'000'000).ok()) return 1;
  }
  if (!(*writer)->Close().ok()) return 1;
  const std::string whole = Read(scratch / "seed-000000.loupe");
  fs::remove_all(scratch);
  Write(segments / "whole.loupe", whole);
  Write(segments / "half.loupe", std::string_view(whole).substr(0, whole.size() / 2));

  // Bare blocks: what Frame.events holds.
  format::BlockEncoder encoder;
  synthetic::Trace synthetic;
  std::string frame;
  for (int i = 0; i < 2; ++i) {
    if (i == 0) {
      for (const format::Record& record : testing::EveryKind()) encoder.Append(record);
    } else {
      for (int n = 0; n < 200; ++n) encoder.Append(synthetic.Next());
    }
    encoder.FinishBlock(&frame);
    format::wire::Cursor cursor(frame);
    uint64_t tag = 0;
    std::string_view body;
    if (!cursor.ReadVarint(&tag) || !cursor.ReadLengthDelimited(&body)) return 1;
    Write(blocks / ("block" + std::to_string(i) + ".bin"), body);
  }
  return 0;
}
