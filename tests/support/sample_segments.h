// Real sealed segment files, written by SegmentWriter from a synthetic
// trace, for tests and benchmarks of shipping and collecting.
#ifndef LOUPE_TESTS_SUPPORT_SAMPLE_SEGMENTS_H_
#define LOUPE_TESTS_SUPPORT_SAMPLE_SEGMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace loupe::testing {

struct SampleSegments {
  std::string directory;
  std::string session = "sample";
  std::string host = "test-host";
  uint64_t events = 200'000;
  uint64_t max_file_size = 256 << 10;  // how big each segment gets
  uint64_t max_total_size = 1ull << 30;
  size_t block_bytes = 64 << 10;
  uint64_t seed = 1;
};

// Writes the segments; returns their paths in sequence order.
std::vector<std::string> WriteSampleSegments(const SampleSegments& sample);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_SAMPLE_SEGMENTS_H_
