// Segments of earlier codings still read record for record as they were
// written. Coding 1 (format version 1, blocks without a coding field): a
// request service traced by tracectl attach and a tracectl demo trace, made
// by the last writer of version 1, with the JSON lines `tracectl export
// --format json` printed for them then (zstd-compressed). Coding 2 (format
// version 2): the same records written again by the last writer of version
// 2, in blocks of 4 KiB so that predictions restart often.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/format/frame_codec.h"
#include "daemon/format/record_json.h"
#include "daemon/format/segment_reader.h"

namespace loupe::format {
namespace {

std::string FixturePath(const std::string& name) {
  return std::string(LOUPE_FORMAT_FIXTURES) + "/" + name;
}

std::vector<std::string> ExpectedLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream compressed;
  compressed << in.rdbuf();
  std::string text;
  FrameDecompressor decompressor;
  EXPECT_TRUE(decompressor.Decompress(compressed.str(), 64 << 20, &text).ok()) << path;
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

struct Fixture {
  std::string segment;
  std::string records;  // the JSON lines
  uint32_t version;
};

class EarlierCodingTest : public ::testing::TestWithParam<Fixture> {};

TEST_P(EarlierCodingTest, ReadsAsWritten) {
  auto reader = SegmentReader::Open(FixturePath(GetParam().segment));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().format_version(), GetParam().version);
  const std::vector<std::string> expected = ExpectedLines(FixturePath(GetParam().records));
  ASSERT_GT(expected.size(), 1000u);
  std::vector<std::string> read;
  Record record;
  while ((*reader)->Next(&record)) read.push_back(RecordJson(record));
  EXPECT_TRUE((*reader)->complete());
  EXPECT_TRUE((*reader)->problems().empty());
  ASSERT_EQ(read.size(), expected.size());
  for (size_t i = 0; i < read.size(); ++i) ASSERT_EQ(read[i], expected[i]) << "record " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, EarlierCodingTest,
    ::testing::Values(Fixture{"coding1_service.loupe", "coding1_service.jsonl.zst", 1},
                      Fixture{"coding1_synthetic.loupe", "coding1_synthetic.jsonl.zst", 1},
                      Fixture{"coding2_service.loupe", "coding1_service.jsonl.zst", 2},
                      Fixture{"coding2_synthetic.loupe", "coding1_synthetic.jsonl.zst", 2}));

}  // namespace
}  // namespace loupe::format
