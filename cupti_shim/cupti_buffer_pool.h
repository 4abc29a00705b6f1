// The activity buffers the shim hands CUPTI: a bounded pool, recycled after
// the parser has read them.
//
// Zeroed mode: by default CUPTI zeroes each buffer it is handed, on whatever
// application thread needed a new one, in the middle of a kernel launch.
// With CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER set, the client
// promises buffers that are already zero and CUPTI skips that.  The pool
// then allocates fresh pages (zero from the kernel, nobody writes them) and
// zeroes a used buffer when it comes back, which happens on the shim's
// parser thread.  What it saves is small (one 8 MiB memset per buffer,
// some 30,000 kernel records): on an H100 it did not show against the
// spread between processes (docs/archive/gpu-results.md: "the zeroed-buffer
// pool, A/B").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpuos_shim {

class ActivityBufferPool {
 public:
  // CUPTI recommends 1-10 MiB buffers; 64 of them cap the shim's memory at
  // 512 MiB in the worst case (a parser that cannot keep up), after which
  // CUPTI drops records and counts them rather than the job running out.
  static constexpr size_t kBufferBytes = size_t{8} << 20;
  static constexpr size_t kMaxBuffers = 64;

  explicit ActivityBufferPool(size_t buffer_bytes = kBufferBytes, size_t max_buffers = kMaxBuffers)
      : buffer_bytes_(buffer_bytes), max_buffers_(max_buffers) {}
  ~ActivityBufferPool();
  ActivityBufferPool(const ActivityBufferPool&) = delete;
  ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;

  // Whether every buffer Take() returns is all zero.  Set before the first
  // Take() of a recording (CUPTI learns it from the same setting); buffers
  // already idle in the pool are zeroed on the spot when it is turned on.
  void SetZeroed(bool zeroed);
  bool zeroed() const { return zeroed_.load(std::memory_order_relaxed); }

  // A buffer of buffer_bytes() for CUPTI, or null when max_buffers are out
  // or memory ran out (counted in refused()).  Called from CUPTI's buffer
  // request callback, on an application thread: no zeroing here.
  uint8_t* Take();
  // A buffer Take() gave out, after its records were read.  In zeroed mode
  // it is zeroed first, on the caller's (the parser's) thread.
  void Return(uint8_t* buffer);
  // Frees the idle buffers (those CUPTI does not hold).
  void FreeIdle();

  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t max_buffers() const { return max_buffers_; }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  size_t allocated() const;

  // fork(): held across it so that the child finds the lock free.
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

 private:
  const size_t buffer_bytes_;
  const size_t max_buffers_;
  std::atomic<bool> zeroed_{false};
  std::atomic<uint64_t> refused_{0};
  mutable std::mutex mu_;  // guards idle_ and allocated_
  std::vector<uint8_t*> idle_;
  size_t allocated_ = 0;
};

}  // namespace gpuos_shim
