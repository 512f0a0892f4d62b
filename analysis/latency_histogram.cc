#include "analysis/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace loupe::analysis {

// Values below kSubBuckets have a bucket each; above, a power of two is
// split into kSubBuckets equal parts.
size_t LatencyHistogram::Bucket(uint64_t ns) {
  if (ns < kSubBuckets) return static_cast<size_t>(ns);
  const int exponent = 63 - std::countl_zero(ns);  // >= 6
  const uint64_t fraction = (ns >> (exponent - 6)) & (kSubBuckets - 1);
  return static_cast<size_t>((exponent - 5) * kSubBuckets + fraction);
}

uint64_t LatencyHistogram::BucketValue(size_t bucket) {
  if (bucket < kSubBuckets) return bucket;
  const int exponent = static_cast<int>(bucket / kSubBuckets) + 5;
  const uint64_t fraction = bucket % kSubBuckets;
  return ((kSubBuckets + fraction + 1) << (exponent - 6)) - 1;
}

void LatencyHistogram::Add(uint64_t ns) {
  ++buckets_[Bucket(ns)];
  ++count_;
  total_ += ns;
  max_ = std::max(max_, ns);
}

uint64_t LatencyHistogram::BucketFloor(size_t bucket) {
  return bucket == 0 ? 0 : BucketValue(bucket - 1) + 1;
}

size_t LatencyHistogram::QuantileBucket(double q) const {
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count_)));
  uint64_t seen = 0;
  for (size_t bucket = 0; bucket < buckets_.size(); ++bucket) {
    seen += buckets_[bucket];
    if (seen >= rank) return bucket;
  }
  return buckets_.size() - 1;
}

uint64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  return std::min(BucketValue(QuantileBucket(q)), max_);
}

}  // namespace loupe::analysis
