// Frames compressed with block starts: ordinary frames to a reader, smaller
// when the parts differ.
#include "daemon/format/frame_codec.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace loupe::format {
namespace {

std::string Decompressed(std::string_view frame) {
  FrameDecompressor decompressor;
  std::string out;
  EXPECT_TRUE(decompressor.Decompress(frame, kMaxDecompressedFrame, &out).ok());
  return out;
}

// Bytes of every value, then bytes of four values: unlike statistics.
std::string TwoColumns(size_t each) {
  std::mt19937 rng(7);
  std::string payload;
  for (size_t i = 0; i < each; ++i) payload.push_back(static_cast<char>(rng()));
  for (size_t i = 0; i < each; ++i) payload.push_back(static_cast<char>(rng() % 4));
  return payload;
}

TEST(FrameCodecTest, ABlockPerColumnReadsBackAndIsSmaller) {
  const std::string payload = TwoColumns(60'000);
  auto compressor = FrameCompressor::Create(3);
  ASSERT_TRUE(compressor.ok());
  std::string whole, split;
  ASSERT_TRUE(compressor->Compress(payload, &whole).ok());
  const std::vector<size_t> starts = {60'000};
  ASSERT_TRUE(compressor->Compress(payload, &split, starts).ok());
  EXPECT_EQ(Decompressed(whole), payload);
  EXPECT_EQ(Decompressed(split), payload);
  EXPECT_LT(split.size(), whole.size());
}

TEST(FrameCodecTest, StartsTooCloseOrPastTheEndAreIgnored) {
  const std::string payload = TwoColumns(20'000);
  auto compressor = FrameCompressor::Create(3);
  ASSERT_TRUE(compressor.ok());
  const std::vector<size_t> starts = {0, 1, 2, 20'000, 20'001, 39'999, 40'000, 1'000'000};
  std::string frame = "kept";  // Compress appends
  ASSERT_TRUE(compressor->Compress(payload, &frame, starts).ok());
  EXPECT_EQ(frame.substr(0, 4), "kept");
  EXPECT_EQ(Decompressed(std::string_view(frame).substr(4)), payload);
  std::string empty;
  ASSERT_TRUE(compressor->Compress("", &empty, starts).ok());
  EXPECT_EQ(Decompressed(empty), "");
}

}  // namespace
}  // namespace loupe::format
