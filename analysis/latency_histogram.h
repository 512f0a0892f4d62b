// Durations, kept in log-linear buckets (64 per power of two: quantiles
// within 1.6 %), with exact count, total and maximum: memory is fixed
// however many values are added.
#ifndef LOUPE_ANALYSIS_LATENCY_HISTOGRAM_H_
#define LOUPE_ANALYSIS_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace loupe::analysis {

class LatencyHistogram {
 public:
  void Add(uint64_t ns);
  // The q-quantile (0 < q <= 1), to within one bucket; 0 when empty.
  uint64_t Quantile(double q) const;
  uint64_t count() const { return count_; }
  uint64_t total() const { return total_; }
  uint64_t max() const { return max_; }
  // The bucket that holds the q-quantile, and the smallest value a bucket
  // holds: "every value >= BucketFloor(QuantileBucket(q))" is an exact set.
  size_t QuantileBucket(double q) const;
  static size_t Bucket(uint64_t ns);
  static constexpr size_t kBuckets = 64 * 64;
  static uint64_t BucketFloor(size_t bucket);

 private:
  static constexpr int kSubBuckets = 64;
  static uint64_t BucketValue(size_t bucket);  // its upper bound
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0, total_ = 0, max_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_LATENCY_HISTOGRAM_H_
