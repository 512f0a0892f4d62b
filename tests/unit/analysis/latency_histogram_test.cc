// Latency percentiles within a bucket, and bucket floors that make "at or
// above the p90 bucket" an exact set.
#include "analysis/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace loupe::analysis {
namespace {

TEST(LatencyHistogramTest, QuantilesWithinABucketOfExact) {
  LatencyHistogram histogram;
  std::vector<uint64_t> values;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100'000; ++i) {
    const uint64_t v = 1000 + rng() % 10'000'000;
    values.push_back(v);
    histogram.Add(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = static_cast<double>(values[static_cast<size_t>(q * values.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(histogram.Quantile(q)), exact, exact * 0.016) << q;
  }
  EXPECT_EQ(histogram.max(), values.back());
  EXPECT_EQ(histogram.count(), values.size());
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0u);
}

TEST(LatencyHistogramTest, ABucketsFloorIsTheSmallestValueItHolds) {
  for (uint64_t v : {0ull, 1ull, 63ull, 64ull, 65ull, 1000ull, 123'456'789ull}) {
    const size_t bucket = LatencyHistogram::Bucket(v);
    EXPECT_LE(LatencyHistogram::BucketFloor(bucket), v);
    if (bucket > 0) {
      EXPECT_LT(LatencyHistogram::Bucket(LatencyHistogram::BucketFloor(bucket) - 1), bucket);
    }
    EXPECT_EQ(LatencyHistogram::Bucket(LatencyHistogram::BucketFloor(bucket)), bucket);
  }
  LatencyHistogram histogram;
  for (uint64_t v = 1; v <= 100; ++v) histogram.Add(v * 1000);
  const uint64_t floor = LatencyHistogram::BucketFloor(histogram.QuantileBucket(0.9));
  EXPECT_LE(floor, 90'000u);
  EXPECT_GT(floor, 88'000u);
}

}  // namespace
}  // namespace loupe::analysis
