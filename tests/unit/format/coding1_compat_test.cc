// Segments written before coding 2 (format version 1, blocks without a
// coding field) still read record for record as they were written: the
// fixtures are a request service traced by tracectl attach and a tracectl
// demo trace, made by the last writer of version 1, with the JSON lines
// `tracectl export --format json` printed for them then (zstd-compressed).
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

std::string Fixture(const std::string& name) {
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

class Coding1Test : public ::testing::TestWithParam<std::string> {};

TEST_P(Coding1Test, ReadsAsWritten) {
  auto reader = SegmentReader::Open(Fixture(GetParam() + ".loupe"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().format_version(), 1u);
  const std::vector<std::string> expected = ExpectedLines(Fixture(GetParam() + ".jsonl.zst"));
  ASSERT_GT(expected.size(), 1000u);
  std::vector<std::string> read;
  Record record;
  while ((*reader)->Next(&record)) read.push_back(RecordJson(record));
  EXPECT_TRUE((*reader)->complete());
  EXPECT_TRUE((*reader)->problems().empty());
  ASSERT_EQ(read.size(), expected.size());
  for (size_t i = 0; i < read.size(); ++i) ASSERT_EQ(read[i], expected[i]) << "record " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Coding1Test, ::testing::Values("coding1_service", "coding1_synthetic"));

}  // namespace
}  // namespace loupe::format
