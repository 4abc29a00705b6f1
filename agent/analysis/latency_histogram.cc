// Log-linear duration histogram; see latency_histogram.h.
#include "analysis/latency_histogram.h"

#include <algorithm>

namespace gpuos {

int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < kSubBuckets) return static_cast<int>(v);
  int log2 = 63 - __builtin_clzll(v);  // >= 4
  int shift = log2 - 4;                // keep the top 5 bits: 1xxxx
  int sub = static_cast<int>((v >> shift) & (kSubBuckets - 1));
  return (log2 - 3) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::UpperBound(int bucket) {
  if (bucket < kSubBuckets) return static_cast<uint64_t>(bucket);
  int log2 = bucket / kSubBuckets + 3;
  int sub = bucket % kSubBuckets;
  int shift = log2 - 4;
  uint64_t base = (static_cast<uint64_t>(kSubBuckets) | static_cast<uint64_t>(sub)) << shift;
  return base + ((1ull << shift) - 1);
}

void LatencyHistogram::Add(uint64_t value_ns) {
  ++buckets_[static_cast<size_t>(BucketOf(value_ns))];
  ++count_;
  min_ = std::min(min_, value_ns);
  max_ = std::max(max_, value_ns);
  sum_ += value_ns;
}

uint64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1)) + 1;
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[static_cast<size_t>(b)];
    if (seen >= rank) return std::clamp(UpperBound(b), min(), max_);
  }
  return max_;
}

}  // namespace gpuos
