// Counter tracks computed over fixed time buckets (10 ms by default): GPU
// busy % per device, page faults/s and context switches/s per process.
// Contributions arrive in start-time order (pass 2), so a bucket is final
// once time has moved past its end; it is then reported at its start time,
// as a step value that holds until the next one.  Only changes are reported
// (a value equal to the last one adds nothing), so idle stretches cost one
// zero, not one value per bucket.  State is kept only for buckets still open.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuos {

class CounterBuckets {
 public:
  using EmitFn = std::function<void(uint64_t ts, uint32_t track, double value)>;
  explicit CounterBuckets(uint64_t bucket_ns);

  // `scale` turns a bucket's accumulated amount into the value shown.
  void DefineTrack(uint32_t track, double scale);
  // Spreads `amount` evenly over [start, end) (or puts it all in the bucket
  // of `start` when end <= start).  start must not precede the time last
  // passed to AdvanceTo.
  void Add(uint32_t track, uint64_t start, uint64_t end, double amount);
  // Closes every bucket that ends at or before `ts` and reports them.
  void AdvanceTo(uint64_t ts, const EmitFn& emit);
  // Closes every bucket.
  void Finish(const EmitFn& emit);

  uint64_t bucket_ns() const { return bucket_ns_; }

 private:
  struct State {
    uint32_t track = 0;
    double scale = 1;
    std::map<uint64_t, double> open;  // bucket index -> amount
    double last_value = 0;
    bool emitted = false;
    uint64_t next_bucket = 0;  // first bucket not yet reported
  };
  void Close(uint64_t end_bucket, const EmitFn& emit);

  uint64_t bucket_ns_;
  std::vector<State> states_;  // in definition order, for determinism
  absl::flat_hash_map<uint32_t, size_t> slots_;  // track -> index in states_
  uint64_t closed_until_ = 0;    // buckets below this index are reported
  struct Pending {
    uint64_t ts;
    uint32_t track;
    double value;
  };
  std::vector<Pending> pending_;
};

}  // namespace gpuos
