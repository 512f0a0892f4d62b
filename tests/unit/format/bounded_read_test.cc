// Bounded reading: crafted segments that decode (or claim to decode) to far
// more than they hold are damaged, never allocated; counts inside a block are
// held to what the block holds; files that are not regular are refused; and
// duplicated, reordered or missing frames make a segment incomplete, naming
// the frame.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/format/block_decoder.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/parsed_size.h"
#include "daemon/format/record_json.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/trace_reader.h"
#include "daemon/format/wire.h"
#include "tests/support/crafted_segments.h"
#include "tests/support/temp_dir.h"

namespace loupe::format {
namespace {

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Read {
  bool opened = false;
  std::string open_error;
  std::vector<std::string> json;
  std::vector<std::string> problems;
  bool complete = false;
};

Read ReadSegment(const std::string& path) {
  Read out;
  auto reader = SegmentReader::Open(path);
  if (!reader.ok()) {
    out.open_error = reader.status().ToString();
    return out;
  }
  out.opened = true;
  Record record;
  while ((*reader)->Next(&record)) out.json.push_back(RecordJson(record));
  out.problems = (*reader)->problems();
  out.complete = (*reader)->complete();
  return out;
}

std::string AllProblems(const Read& read) {
  std::string all = read.open_error;
  for (const std::string& problem : read.problems) all += "\n" + problem;
  return all;
}

// The peak resident size of this process, in bytes, since the last reset.
uint64_t PeakRss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}
bool ResetPeakRss() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

class CraftedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    segment_ = testing::WriteSmallSegment(dir_.path(), "crafted");
    ASSERT_FALSE(segment_.empty());
  }
  testing::TempDir dir_;
  std::string segment_;
};

TEST_F(CraftedTest, HealthySegmentNumbersItsFramesAndReadsComplete) {
  const std::string path = dir_.File("healthy.loupe");
  WriteFile(path, segment_);
  auto reader = SegmentReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->header().numbered_frames());
  Record record;
  while ((*reader)->Next(&record)) {
  }
  EXPECT_TRUE((*reader)->complete()) << ::testing::PrintToString((*reader)->problems());
  EXPECT_EQ((*reader)->trailer().frame_number(), 6u);  // header, 4 blocks, symbols, trailer
  EXPECT_EQ((*reader)->symbols().frame_number(), 5u);
}

// Under AddressSanitizer the resident size counts shadow memory: the bombs
// still go through the reader (its most hostile input), one payload size
// only, without the memory bound (a figure of the release build).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
constexpr bool kAddressSanitizer = __has_feature(address_sanitizer);
#else
constexpr bool kAddressSanitizer = false;
#endif

// Each bomb packs a payload under the reader's frame bound (its table and
// parse bounds stop it) or over it (the frame bound does): the reader says
// "damaged", and its memory stays far below what the bomb asks for.
TEST_F(CraftedTest, BombsAreDamagedAndCostLittleMemory) {
  std::vector<size_t> payloads = {size_t{31} << 20};
  if (!kAddressSanitizer) payloads.push_back(size_t{48} << 20);
  for (size_t payload : payloads) {
    const std::vector<testing::CraftedSegment> bombs = testing::CraftBombs(segment_, payload);
    ASSERT_EQ(bombs.size(), 7u);
    for (const testing::CraftedSegment& bomb : bombs) {
      SCOPED_TRACE(bomb.name + ": " + bomb.what);
      const std::string path = dir_.File(bomb.name + ".loupe");
      WriteFile(path, bomb.bytes);
      ASSERT_TRUE(ResetPeakRss());
      const uint64_t before = PeakRss();
      const Read read = ReadSegment(path);
      const uint64_t peak = PeakRss();
      EXPECT_FALSE(read.complete);
      EXPECT_NE(AllProblems(read).find("damaged: "), std::string::npos) << AllProblems(read);
      // The frame's content and the decoded tables, each at most 32 MiB.
      if (!kAddressSanitizer) {
        EXPECT_LT(peak - before, uint64_t{80} << 20) << "peak " << (peak >> 20) << " MiB";
      }
    }
  }
}

TEST_F(CraftedTest, DuplicatedSwappedAndMissingFramesAreNamed) {
  const Read whole = [&] {
    WriteFile(dir_.File("whole.loupe"), segment_);
    return ReadSegment(dir_.File("whole.loupe"));
  }();
  ASSERT_TRUE(whole.complete);
  const std::vector<testing::CraftedSegment> damaged = testing::CraftReorderings(segment_);
  ASSERT_EQ(damaged.size(), 4u);
  const std::pair<std::string, std::string> expected[] = {
      {"duplicated", "damaged: frame #2 again where frame #3 was expected"},
      {"swapped", "damaged: frame #3 where frame #2 was expected: frame #2 is missing"},
      {"dropped", "damaged: frame #4 where frame #3 was expected: frame #3 is missing"},
      {"dropped-last", "damaged: frame #5 where frame #4 was expected: frame #4 is missing"},
  };
  for (size_t i = 0; i < damaged.size(); ++i) {
    SCOPED_TRACE(damaged[i].what);
    ASSERT_EQ(damaged[i].name, expected[i].first);
    const std::string path = dir_.File(damaged[i].name + ".loupe");
    WriteFile(path, damaged[i].bytes);
    const Read read = ReadSegment(path);
    ASSERT_TRUE(read.opened);
    EXPECT_FALSE(read.complete);
    ASSERT_FALSE(read.problems.empty());
    EXPECT_NE(read.problems.front().find(expected[i].second), std::string::npos)
        << read.problems.front();
    // What was read is what was written, in order; a duplicate is skipped.
    ASSERT_LE(read.json.size(), whole.json.size());
    EXPECT_TRUE(std::equal(read.json.begin(), read.json.end(), whole.json.begin()));
    if (damaged[i].name == "duplicated") {
      EXPECT_EQ(read.json.size(), whole.json.size());
    }
  }
}

// A segment from before frame numbers (the header does not promise them)
// reads as it always did.
TEST_F(CraftedTest, SegmentsWithoutFrameNumbersReadAsBefore) {
  std::vector<std::string> frames = testing::SplitFrames(segment_);
  ASSERT_EQ(frames.size(), 8u);
  auto reader = SegmentReader::Open([&] {
    WriteFile(dir_.File("new.loupe"), segment_);
    return dir_.File("new.loupe");
  }());
  ASSERT_TRUE(reader.ok());
  v1::SegmentHeader header = (*reader)->header();
  header.clear_numbered_frames();
  frames[1] = testing::CompressFrame(layout::kFrameHeader, header.SerializeAsString());
  const std::string old_path = dir_.File("old.loupe");
  WriteFile(old_path, testing::JoinFrames(frames));
  const Read read = ReadSegment(old_path);
  EXPECT_TRUE(read.complete) << AllProblems(read);
  EXPECT_EQ(read.json.size(), 4u * (kMaxRecordKind - 1));
}

TEST(NonRegularFileTest, FifoDirectoryAndDeviceAreRefusedWithoutWaiting) {
  testing::TempDir dir;
  const std::string fifo = dir.File("x.loupe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto reader = SegmentReader::Open(fifo);  // would wait for a writer forever
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().ToString().find("a fifo, not a regular file"), std::string::npos)
      << reader.status();
  reader = SegmentReader::Open(dir.path());
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().ToString().find("a directory"), std::string::npos);
  reader = SegmentReader::Open("/dev/zero");
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().ToString().find("a character device"), std::string::npos);

  // Named directly to the trace reader: a problem of that file, not a hang.
  auto trace = TraceReader::Open({fifo});
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  EXPECT_FALSE((*trace)->Next(&record));
  ASSERT_EQ((*trace)->summaries().size(), 1u);
  ASSERT_EQ((*trace)->summaries()[0].problems.size(), 1u);
  EXPECT_NE((*trace)->summaries()[0].problems[0].find("a fifo"), std::string::npos);
}

// Counts inside a block are held to what the block can hold, before anything
// is allocated for them.
TEST(BlockBoundsTest, CountsBeyondTheBlockAreCorrupt) {
  InternTables tables;
  BlockDecoder decoder(&tables);
  std::string block;
  wire::AppendVarintField(&block, layout::kEventCount, 1'000'000);
  wire::AppendBytesField(&block, layout::kKinds, std::string(10, '\x01'));
  absl::Status status = decoder.Start(block);
  EXPECT_NE(status.ToString().find("1000000 events but the kind column holds at most 10"),
            std::string::npos)
      << status;

  block.clear();
  wire::AppendVarintField(&block, layout::kFirstStackId, 1);
  std::string depths;
  for (int i = 0; i < 4; ++i) wire::AppendVarint(&depths, 512);
  wire::AppendBytesField(&block, layout::kStackDepths, depths);
  wire::AppendBytesField(&block, layout::kStackFrameDeltas, std::string(100, '\0'));
  status = decoder.Start(block);
  EXPECT_NE(status.ToString().find("stacks of 2048 frames but the frame column holds at most 100"),
            std::string::npos)
      << status;
  EXPECT_EQ(tables.stack_count(), 0u);
}

TEST(BlockBoundsTest, TablesPastTheirLimitAreDamagedAndUntouched) {
  InternTables tables;
  tables.set_limit(1 << 20);
  BlockDecoder decoder(&tables);
  auto strings_block = [](uint64_t first_id, int count) {
    std::string block;
    wire::AppendVarintField(&block, layout::kFirstStringId, first_id);
    for (int i = 0; i < count; ++i) {
      wire::AppendBytesField(&block, layout::kStrings, std::string(60'000, 'x'));
    }
    return block;
  };
  absl::Status status = decoder.Start(strings_block(1, 20));  // 1.2 MB at once
  EXPECT_NE(status.ToString().find("damaged: event block defines 20 strings"), std::string::npos)
      << status;
  EXPECT_EQ(tables.string_count(), 0u);
  ASSERT_TRUE(decoder.Start(strings_block(1, 10)).ok());
  EXPECT_EQ(tables.string_count(), 10u);
  EXPECT_EQ(tables.bytes(), InternTables::Cost(10, 600'000, 0, 0));
  status = decoder.Start(strings_block(11, 10));  // 1.2 MB together
  EXPECT_NE(status.ToString().find("over the reader's bound of 1048576"), std::string::npos)
      << status;
  EXPECT_EQ(tables.string_count(), 10u);
}

// The estimate that guards protobuf frames is never below what parsing takes.
TEST(ParsedSizeTest, BoundIsAtLeastWhatParsingTakes) {
  v1::SymbolTable table;
  for (int i = 0; i < 1000; ++i) {
    v1::SymbolTable::Address* address = table.add_addresses();
    address->set_pid(i);
    address->set_address(0x400000 + i);
    for (int f = 0; f < 3; ++f) {
      address->add_frames()->set_function("function_with_a_long_enough_name_" + std::to_string(i));
    }
  }
  table.add_mappings()->set_path("/usr/lib/x86_64-linux-gnu/libc.so.6");
  table.add_notes("a note");
  v1::SegmentHeader header;
  for (int i = 0; i < 1000; ++i) (*header.mutable_config())["key" + std::to_string(i)] = "value";
  v1::SegmentTrailer trailer;
  for (int i = 0; i < 1000; ++i) trailer.add_kind_counts()->set_count(i);
  for (const google::protobuf::Message* message :
       std::initializer_list<const google::protobuf::Message*>{&table, &header, &trailer}) {
    const std::string bytes = message->SerializeAsString();
    const std::optional<uint64_t> bound =
        ParsedSizeBound(*message->GetDescriptor(), bytes, UINT64_MAX);
    ASSERT_TRUE(bound.has_value());
    std::unique_ptr<google::protobuf::Message> parsed(message->New());
    const std::unique_ptr<google::protobuf::Message> empty(message->New());
    ASSERT_TRUE(parsed->ParseFromString(bytes));
    // The message itself is not counted: it is a member of the reader.
    EXPECT_GE(*bound, parsed->SpaceUsedLong() - empty->SpaceUsedLong()) << message->GetTypeName();
    EXPECT_LT(*bound, 8 * parsed->SpaceUsedLong()) << message->GetTypeName();  // not absurd
  }
  EXPECT_FALSE(ParsedSizeBound(*v1::SymbolTable::descriptor(), "\x12\x05\x08", 1000).has_value());
}

}  // namespace
}  // namespace loupe::format
