// Distribution of durations in constant memory: log-linear buckets (16 per
// power of two, so any quantile is within 1/16 = 6% of the true value), with
// the exact minimum, maximum and sum kept aside.
#pragma once

#include <array>
#include <cstdint>

namespace gpuos {

class LatencyHistogram {
 public:
  void Add(uint64_t value_ns);
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  uint64_t sum() const { return sum_; }
  // Quantile q in [0, 1]: an upper bound of the bucket holding it, clamped
  // to [min, max].
  uint64_t Quantile(double q) const;

 private:
  static constexpr int kSubBuckets = 16;
  static constexpr int kBuckets = 64 * kSubBuckets;
  static int BucketOf(uint64_t v);
  static uint64_t UpperBound(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t min_ = ~0ull;
  uint64_t max_ = 0;
  uint64_t sum_ = 0;
};

}  // namespace gpuos
