// ReadSegmentSymbols against SegmentReader on the same files: sealed, cut at
// every offset of its last frames, never sealed, and not a segment.
#include "daemon/format/segment_symbols.h"

#include <gtest/gtest.h>

#include <memory>
#include <fstream>

#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "tests/support/every_kind.h"
#include "tests/support/temp_dir.h"

namespace loupe::format {
namespace {

v1::SymbolTable SomeSymbols() {
  v1::SymbolTable table;
  v1::SymbolTable::Mapping* mapping = table.add_mappings();
  mapping->set_pid(42);
  mapping->set_start(0x400000);
  mapping->set_end(0x500000);
  mapping->set_path("/usr/bin/app");
  v1::SymbolTable::Address* address = table.add_addresses();
  address->set_pid(42);
  address->set_address(0x401234);
  address->set_mapping(1);
  address->add_frames()->set_function("HandleRequest");
  return table;
}

// Many small blocks, then the symbol frame and the trailer; with `open`, the
// writer is kept there unsealed instead.
std::string Segment(const testing::TempDir& dir, std::unique_ptr<SegmentWriter>* open = nullptr) {
  WriterOptions options{.directory = dir.path(), .session_id = "s"};
  options.rotation_period_ns = 0;
  options.block_flush_period_ns = 1'000'000;
  auto writer = SegmentWriter::Create(options, {}, {}, [] { return SomeSymbols(); });
  EXPECT_TRUE(writer.ok());
  for (int block = 0; block < 20; ++block) {
    const uint64_t start = 1'000'000'000 + block * 10'000'000;
    for (const Record& record : testing::EveryKind(start)) {
      EXPECT_TRUE((*writer)->Append(record).ok());
    }
    EXPECT_TRUE((*writer)->Tick(start + 5'000'000).ok());
  }
  if (open != nullptr) {
    *open = *std::move(writer);
    return dir.File("s-000000.loupe.active");
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return dir.File("s-000000.loupe");
}

std::string ReaderSymbols(const std::string& path) {
  auto reader = SegmentReader::Open(path);
  if (!reader.ok()) return "unreadable";
  Record record;
  while ((*reader)->Next(&record)) {
  }
  return (*reader)->symbols().SerializeAsString();
}

std::string QuickSymbols(const std::string& path) {
  absl::StatusOr<SegmentSymbols> read = ReadSegmentSymbols(path);
  return read.ok() ? read->symbols.SerializeAsString() : "unreadable";
}

TEST(SegmentSymbolsTest, SealedSegmentGivesItsHeaderAndSymbols) {
  testing::TempDir dir;
  const std::string path = Segment(dir);
  absl::StatusOr<SegmentSymbols> read = ReadSegmentSymbols(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->symbols.addresses_size(), 1);
  EXPECT_EQ(read->symbols.addresses(0).frames(0).function(), "HandleRequest");
  EXPECT_EQ(read->symbols.SerializeAsString(), ReaderSymbols(path));
  auto reader = SegmentReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(read->header.SerializeAsString(), (*reader)->header().SerializeAsString());
}

// What the system and the user name need not be UTF-8: a binary under a
// directory named in Latin-1, a host name, a probe's path in the settings.
// The segment still reads back whole, with every byte as it was written.
TEST(SegmentSymbolsTest, NamesThatAreNotUtfEightReadBackAsWritten) {
  testing::TempDir dir;
  const std::string odd = "/srv/caf\xe9/app\xff";
  v1::SegmentHeader header;
  header.set_host("h\xf6st");
  (*header.mutable_config())["uprobes"] = odd + ":handle";
  (*header.mutable_kernel_features())["uprobes"] = "0 of 1 sites attached: " + odd;
  WriterOptions options{.directory = dir.path(), .session_id = "s", .writer_id = "embedded " + odd};
  auto writer = SegmentWriter::Create(options, header, {}, [&] {
    v1::SymbolTable table = SomeSymbols();
    table.mutable_mappings(0)->set_path(odd);
    table.mutable_addresses(0)->mutable_frames(0)->set_file(odd + ".c");
    table.add_notes("no debug info in " + odd);
    return table;
  });
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const Record& record : testing::EveryKind(1'000'000'000)) {
    ASSERT_TRUE((*writer)->Append(record).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());

  auto reader = SegmentReader::Open(dir.File("s-000000.loupe"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  Record record;
  while ((*reader)->Next(&record)) {
  }
  EXPECT_TRUE((*reader)->has_trailer());  // sealed; its verdict counts EveryKind's Loss
  EXPECT_TRUE((*reader)->problems().empty());
  EXPECT_EQ((*reader)->header().host(), "h\xf6st");
  EXPECT_EQ((*reader)->header().config().at("uprobes"), odd + ":handle");
  EXPECT_EQ((*reader)->header().writer_id(), "embedded " + odd);
  ASSERT_EQ((*reader)->symbols().mappings_size(), 1);
  EXPECT_EQ((*reader)->symbols().mappings(0).path(), odd);
  EXPECT_EQ((*reader)->symbols().addresses(0).frames(0).file(), odd + ".c");
  EXPECT_EQ((*reader)->symbols().notes(0), "no debug info in " + odd);
}

TEST(SegmentSymbolsTest, CutFilesAgreeWithTheReader) {
  testing::TempDir dir;
  const std::string path = Segment(dir);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string cut = dir.File("cut.loupe");
  // Every offset through the last event block, the symbols and the trailer.
  const size_t from = bytes.size() > 600 ? bytes.size() - 600 : 0;
  for (size_t size = from; size <= bytes.size(); ++size) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                                 static_cast<std::streamsize>(size));
    ASSERT_EQ(QuickSymbols(cut), ReaderSymbols(cut)) << "cut at " << size;
  }
}

TEST(SegmentSymbolsTest, UnsealedSegmentHasNone) {
  testing::TempDir dir;
  std::unique_ptr<SegmentWriter> open;
  const std::string path = Segment(dir, &open);
  absl::StatusOr<SegmentSymbols> read = ReadSegmentSymbols(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->symbols.ByteSizeLong(), 0u);
}

TEST(SegmentSymbolsTest, NotASegmentFailsAsTheReaderDoes) {
  testing::TempDir dir;
  const std::string path = dir.File("not.loupe");
  std::ofstream(path) << "hello";
  absl::StatusOr<SegmentSymbols> read = ReadSegmentSymbols(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status(), SegmentReader::Open(path).status());
}

}  // namespace
}  // namespace loupe::format
