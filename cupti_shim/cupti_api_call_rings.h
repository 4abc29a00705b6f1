// CUDA API calls timed by the shim itself, through CUPTI's Callback API
// (an entry and an exit callback per call), instead of CUPTI's RUNTIME and
// DRIVER activity records, when GPUOS_CUPTI_API_TIMING=callback.  Kernel,
// copy and set records still come from the activity API and carry the
// callback's correlation id, which joins them.  Not the default: measured
// on an H200, each traced call cost 120-400 ns more this way than with
// activity records (docs/archive/gpu-results.md, "API calls timed by callbacks").
//
// Each thread that makes a traced call writes fixed-size records into its
// own single-producer ring: no lock, no allocation and no system call on
// the application's thread after its first call, and never a wait (a full
// ring drops the record and counts it).  The parser thread drains every
// ring.  A ring outlives its thread until the parser has drained it.  A
// thread's ring belongs to the instance it last recorded into: recording
// into another instance in between gives it a new ring (the earlier one is
// freed only with its instance).  An instance must outlive the threads
// that recorded into it; the shim's is never destroyed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace gpuos_shim {

struct TimedApiCall {
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t cbid = 0;
  uint32_t tid = 0;
  int32_t return_value = 0;  // cudaError_t or CUresult
  bool driver = false;       // CUPTI_CB_DOMAIN_DRIVER_API, else runtime
};

class ApiCallRings {
 public:
  // records_per_thread: rounded up to a power of two.
  explicit ApiCallRings(size_t records_per_thread);
  ~ApiCallRings();
  ApiCallRings(const ApiCallRings&) = delete;
  ApiCallRings& operator=(const ApiCallRings&) = delete;

  // On the application's thread.  The thread's first call allocates its
  // ring (and takes a lock once); a full ring drops the call and counts it.
  void Record(const TimedApiCall& call);

  // On a consumer thread (drains are serialized): passes every record
  // written so far to `consume`, each thread's in order, and frees the
  // rings of threads that have exited.  Returns the number of records
  // passed.
  size_t Drain(const std::function<void(const TimedApiCall&)>& consume);

  // Calls dropped since the last call (full rings, or a ring that could not
  // be allocated).
  uint64_t TakeDropped() { return dropped_.exchange(0, std::memory_order_relaxed); }

  size_t records_per_thread() const { return capacity_; }
  // Rings allocated and not yet freed.
  size_t ring_count() {
    std::lock_guard<std::mutex> lock(rings_mu_);
    return rings_.size();
  }

 private:
  struct Ring;
  Ring* RingOfThisThread();
  static void OnThreadExit(void* ring);

  const size_t capacity_;
  const uint64_t generation_;  // tells this instance's rings from another's
  std::atomic<uint64_t> dropped_{0};
  std::mutex drain_mu_;  // one consumer at a time
  std::mutex rings_mu_;  // the list only; never held while writing records
  std::vector<Ring*> rings_;
};

}  // namespace gpuos_shim
