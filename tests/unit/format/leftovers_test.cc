// Sealing what a stopped writer left .active (issue 14 item 6): cut at any
// byte, a leftover is sealed to its last whole block with a trailer that
// says it is incomplete and why, and reads without a problem; its Loss
// records are in the trailer; files that are not the writer's own are left
// as they are.
#include "daemon/format/leftovers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/base/scoped_fd.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "tests/support/temp_dir.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

const WriterIdentity kIdentity{"leftover-host", "louped /run/loupe/test.sock"};

struct Read {
  uint64_t records = 0;
  std::vector<std::string> problems;
  bool has_trailer = false;
  v1::SegmentTrailer trailer;
  v1::SymbolTable symbols;
};

Read ReadSegment(const std::string& path) {
  Read read;
  auto reader = SegmentReader::Open(path);
  if (!reader.ok()) {
    read.problems.emplace_back(reader.status().message());
    return read;
  }
  Record record;
  while ((*reader)->Next(&record)) ++read.records;
  read.problems = (*reader)->problems();
  read.has_trailer = (*reader)->has_trailer();
  read.trailer = (*reader)->trailer();
  read.symbols = (*reader)->symbols();
  return read;
}

// One sealed segment of kIdentity with several blocks, Loss records and a
// symbol table; returns its path.
std::string WriteSegment(const std::string& dir, const std::string& session) {
  WriterOptions options{.directory = dir, .session_id = session};
  options.max_file_size = 1 << 20;
  options.block_bytes = 4 << 10;
  options.rotation_period_ns = 0;
  options.writer_id = kIdentity.writer_id;
  v1::SegmentHeader header;
  header.set_host(kIdentity.host);
  auto symbols = [] {
    v1::SymbolTable table;
    table.add_addresses()->set_address(0x1234);
    return table;
  };
  auto writer = SegmentWriter::Create(
      options, header,
      [](SegmentWriter& w) { w.AppendPreamble({.tid = 7, .payload = ThreadInfo{7, 7, "main"}}); },
      symbols);
  EXPECT_TRUE(writer.ok()) << writer.status();
  synthetic::Trace trace;
  for (int i = 0; i < 20'000; ++i) {
    Record record = trace.Next();
    EXPECT_TRUE((*writer)->Append(record).ok());
    if (i % 5'000 == 0) {
      EXPECT_TRUE((*writer)
                      ->Append({.time_ns = record.time_ns,
                                .payload = Loss{LossSource::kSched, LossReason::kRingFull, 2}})
                      .ok());
    }
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return (*writer)->sealed_paths().front();
}

// Cut anywhere, as a crash may leave it: sealed to its last whole block.
TEST(LeftoversTest, ALeftoverCutAnywhereIsSealedToItsLastWholeBlock) {
  testing::TempDir dir;
  const std::string whole = WriteSegment(dir.path(), "crashed");
  const Read original = ReadSegment(whole);
  ASSERT_TRUE(original.problems.empty());
  const uint64_t size = fs::file_size(whole);
  uint64_t previous_records = 0;
  int sealed_with_blocks = 0;
  for (uint64_t cut = 0; cut <= size; cut += std::max<uint64_t>(1, size / 97)) {
    SCOPED_TRACE(fmt::format("cut at {} of {}", cut, size));
    const std::string active = dir.File("cut-000000.loupe.active");
    fs::copy_file(whole, active, fs::copy_options::overwrite_existing);
    fs::resize_file(active, cut);
    ScopedFd fd(::open(active.c_str(), O_RDWR | O_CLOEXEC));
    uint64_t records = 0;
    const absl::Status status = SealLeftoverFile(fd.get(), active, kLeftoverReason, &records);
    if (!status.ok()) {  // nothing readable: not even the header
      EXPECT_LT(cut, 200u) << status;
      continue;
    }
    const Read read = ReadSegment(active);
    EXPECT_TRUE(read.problems.empty()) << ::testing::PrintToString(read.problems);
    ASSERT_TRUE(read.has_trailer);
    EXPECT_EQ(read.trailer.verdict(), v1::INCOMPLETE);
    ASSERT_GE(read.trailer.reasons_size(), 1);
    EXPECT_EQ(read.trailer.reasons(0), kLeftoverReason);
    EXPECT_EQ(read.trailer.event_count(), read.records);
    EXPECT_EQ(read.records, records);
    EXPECT_GE(read.records, previous_records);  // more file, never fewer records
    EXPECT_LE(read.records, original.records);
    previous_records = read.records;
    if (read.trailer.block_count() > 0) ++sealed_with_blocks;
  }
  EXPECT_GT(sealed_with_blocks, 50);
  EXPECT_EQ(previous_records, original.records);  // the whole file: every record
}

TEST(LeftoversTest, OnlyTheWritersOwnLeftoversAreSealed) {
  testing::TempDir dir, elsewhere;
  // Ours, cut in its last block, with the symbol table its writer wrote
  // before dying (the trailer is cut off).
  const std::string whole = WriteSegment(elsewhere.path(), "ours");
  const Read original = ReadSegment(whole);
  const std::string ours = dir.File("ours-000000.loupe.active");
  fs::copy_file(whole, ours);
  fs::resize_file(ours, fs::file_size(whole) - 10);
  // Another louped's (another socket), same host.
  {
    WriterOptions options{.directory = elsewhere.path(), .session_id = "theirs"};
    options.writer_id = "louped /run/other.sock";
    v1::SegmentHeader header;
    header.set_host(kIdentity.host);
    auto writer = SegmentWriter::Create(options, header);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Close().ok());
    fs::copy_file((*writer)->sealed_paths().front(), dir.File("theirs-000000.loupe.active"));
  }
  // A file that only looks like a segment, a symlink to ours, and a copy
  // of ours with two names.
  std::ofstream(dir.File("notes-000001.loupe.active")) << "not a segment";
  fs::create_symlink(ours, dir.File("link-000000.loupe.active"));
  fs::copy_file(whole, dir.File("twice-000000.loupe.active"));
  fs::create_hard_link(dir.File("twice-000000.loupe.active"), dir.File("twice-000001.loupe.active"));

  const LeftoverReport report = SealLeftovers(dir.path(), kIdentity);
  EXPECT_TRUE(report.failures.empty()) << ::testing::PrintToString(report.failures);
  ASSERT_EQ(report.sealed, std::vector<std::string>{dir.File("ours-000000.loupe")});
  EXPECT_FALSE(fs::exists(ours));
  const Read read = ReadSegment(dir.File("ours-000000.loupe"));
  EXPECT_TRUE(read.problems.empty()) << ::testing::PrintToString(read.problems);
  EXPECT_EQ(read.records, original.records);  // only the trailer was cut
  EXPECT_EQ(report.records, read.records);
  EXPECT_EQ(read.symbols.addresses_size(), 1);  // kept
  EXPECT_EQ(read.trailer.verdict(), v1::INCOMPLETE);
  bool ring_full = false;
  for (const v1::LossTotal& loss : read.trailer.losses()) {
    ring_full |= loss.reason() == v1::RING_FULL && loss.count() == 8;
  }
  EXPECT_TRUE(ring_full) << read.trailer.DebugString();
  for (const char* name : {"theirs-000000.loupe.active", "notes-000001.loupe.active",
                           "link-000000.loupe.active", "twice-000000.loupe.active",
                           "twice-000001.loupe.active"}) {
    EXPECT_TRUE(fs::exists(fs::symlink_status(dir.File(name)))) << name << " was touched";
  }
  EXPECT_EQ(fs::file_size(dir.File("twice-000000.loupe.active")), fs::file_size(whole));
  // Sealed once: a second start finds nothing to do.
  EXPECT_TRUE(SealLeftovers(dir.path(), kIdentity).sealed.empty());
}

// A complete segment whose rename never happened only needs its name.
TEST(LeftoversTest, ASealedSegmentLeftActiveIsOnlyRenamed) {
  testing::TempDir dir, elsewhere;
  const std::string whole = WriteSegment(elsewhere.path(), "renamed");
  fs::copy_file(whole, dir.File("renamed-000000.loupe.active"));
  const LeftoverReport report = SealLeftovers(dir.path(), kIdentity);
  ASSERT_EQ(report.sealed.size(), 1u);
  std::ifstream a(whole, std::ios::binary), b(report.sealed.front(), std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b)));
}

}  // namespace
}  // namespace loupe::format
