// Writes seed inputs for the fuzz targets with the real writer: whole
// segments, cut ones, crafted ones (bombs, frames out of order), segments of
// the previous format version (tests/fixtures/format), and bare event blocks; and control requests as tracectl sends them, good and bad.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "daemon/format/block_encoder.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/wire.h"
#include "loupe/v1/control.pb.h"
#include "tests/support/crafted_segments.h"
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

// AttachRequests: each field set, accepted and refused values.
void WriteControlSeeds(const fs::path& dir) {
  v1::AttachRequest minimal;
  minimal.add_pids(1234);
  minimal.set_session_id("seed");

  v1::AttachRequest full = minimal;
  full.add_pids(1235);
  for (const char* source : {"sched", "cpu", "shim"}) full.add_sources(source);
  full.set_sample_hz(99);
  full.set_sample_event("cycles");
  full.set_follow_children(true);
  full.set_output_dir("/tmp");
  full.set_duration_ms(5'000);
  full.set_ring_buffer_size(4 << 20);
  full.set_offcpu_stacks("user");
  full.add_usdt("libstdcxx:throw");
  full.add_usdt("loupe:*(str arg2)");
  full.add_uprobes("libc:malloc(1)%return");
  full.add_uprobes("/usr/bin/true:main+4");
  full.set_content_policy("full");
  full.set_detached(true);

  // One odd value each, so that every check is reached.
  using Edit = void (*)(v1::AttachRequest&);
  const std::pair<const char*, Edit> refusals[] = {
      {"no_target", [](v1::AttachRequest& r) { r.clear_pids(); }},
      {"bad_source", [](v1::AttachRequest& r) { r.add_sources("bogus"); }},
      {"bad_event", [](v1::AttachRequest& r) { r.set_sample_event("bogus"); }},
      {"bad_hz", [](v1::AttachRequest& r) { r.set_sample_hz(1'000'000); }},
      {"bad_ring", [](v1::AttachRequest& r) { r.set_ring_buffer_size(12345); }},
      {"bad_stacks", [](v1::AttachRequest& r) { r.set_offcpu_stacks("sideways"); }},
      {"bad_policy", [](v1::AttachRequest& r) { r.set_content_policy("some"); }},
      {"bad_duration", [](v1::AttachRequest& r) { r.set_duration_ms(UINT64_MAX); }},
      {"bad_usdt", [](v1::AttachRequest& r) { r.add_usdt(":"); }},
      {"bad_uprobe", [](v1::AttachRequest& r) { r.add_uprobes("%return"); }},
      {"elsewhere", [](v1::AttachRequest& r) { r.set_output_dir("/nonexistent/loupe"); }},
  };
  for (const auto& [name, edit] : refusals) {
    v1::AttachRequest request = minimal;
    edit(request);
    Write(dir / name, request.SerializeAsString());
  }
  const std::pair<const char*, const v1::AttachRequest*> seeds[] = {{"minimal", &minimal},
                                                                    {"full", &full}};
  for (const auto& [name, request] : seeds) Write(dir / name, request->SerializeAsString());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const fs::path segments = argv[1], blocks = argv[2], control = argv[3];
  fs::create_directories(segments);
  fs::create_directories(blocks);
  fs::create_directories(control);
  WriteControlSeeds(control);
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
  // Segments of format version 1, whose blocks are coded the first way.
  for (const char* name : {"coding1_service.loupe", "coding1_synthetic.loupe"}) {
    const std::string old = Read(fs::path(LOUPE_FORMAT_FIXTURES) / name);
    if (old.empty()) return 1;
    Write(segments / name, old);
  }

  // Crafted: bombs that ask for far more than they hold (a reader must stay
  // within the fuzz run's memory limit on them), and frames out of order.
  fs::create_directories(scratch);
  const std::string small = testing::WriteSmallSegment(scratch.string(), "crafted");
  fs::remove_all(scratch);
  if (small.empty()) return 1;
  for (const auto& crafted : testing::CraftBombs(small, 24 << 20)) {
    Write(segments / (crafted.name + ".loupe"), crafted.bytes);
  }
  for (const auto& crafted : testing::CraftReorderings(small)) {
    Write(segments / (crafted.name + ".loupe"), crafted.bytes);
  }

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
  // Counts past what the block holds: a million events in ten kind bytes,
  // 2048 stack frames in a hundred frame bytes.
  std::string counts;
  format::wire::AppendVarintField(&counts, format::layout::kEventCount, 1'000'000);
  format::wire::AppendBytesField(&counts, format::layout::kKinds, std::string(10, '\x01'));
  Write(blocks / "count-lie.bin", counts);
  std::string stacks, depths;
  format::wire::AppendVarintField(&stacks, format::layout::kFirstStackId, 1);
  for (int i = 0; i < 4; ++i) format::wire::AppendVarint(&depths, 512);
  format::wire::AppendBytesField(&stacks, format::layout::kStackDepths, depths);
  format::wire::AppendBytesField(&stacks, format::layout::kStackFrameDeltas, std::string(100, '\0'));
  Write(blocks / "stack-lie.bin", stacks);
  return 0;
}
