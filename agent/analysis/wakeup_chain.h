// Following a wait of the driving thread to the thread that ended it, and
// that thread's waker back a few hops, through the wakers the kernel
// recorded (OffCpu.woken_by_tid, taken at sched_waking): the OS causality
// behind "the driving thread was blocked".  A relay (the pin-memory thread,
// an unnamed thread of the job) is followed to the thread that woke it
// during the wait; a worker, the autograd thread, a CUDA or pool thread
// ends the chain (a worker thread woken by another thread of its own
// process -- Python's queue feeder -- is followed to that thread): its
// state over the wait (running, in the run queue, page-faulting, in
// munmap...) says why the wait took as long as it did.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "analysis/gpu_idle_attribution.h"
#include "analysis/thread_activity.h"
#include "analysis/thread_roles.h"

namespace gpuos {

inline constexpr size_t kMaxWakeHops = 3;

// What a traced thread was doing at an instant, from its off-CPU intervals.
enum class HopState : uint8_t {
  kRunning = 0,
  kRunqueue,    // woken, waiting for a CPU
  kPreempted,   // switched out while runnable
  kPageFault,   // blocked resolving a page fault
  kMmapMunmap,  // blocked inside mmap or munmap
  kIo,          // blocked in another syscall (read, poll, recv, nanosleep...)
  kDisk,        // blocked (not in futex) while block I/O requests it issued were in flight
  kFutex,       // blocked in futex
  kUnknown,     // blocked, cause not known
  kCount,
};
inline constexpr size_t kHopStateCount = static_cast<size_t>(HopState::kCount);
using HopStates = std::array<uint64_t, kHopStateCount>;

const char* HopStateKey(HopState state);   // "page_fault"
const char* HopStateName(HopState state);  // "page-faulting"

// One off-CPU interval of a thread, compactly.  wake_ns: when it became
// runnable again (the start of the run-queue tail); a preempted interval is
// runnable throughout (wake_ns = start_ns).
struct OffCpuInterval {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t wake_ns = 0;
  uint32_t waker_tid = 0;  // 0: unknown, or woken from an interrupt
  uint8_t cause = 0;       // v1::OffCpuCause
  uint8_t mm = 0;          // 1 munmap, 2 mmap, 0 neither
  bool from_interrupt = false;
};

struct WaitChain {
  WaitOn on = WaitOn::kNone;
  std::vector<uint32_t> hops;  // hops[0] woke the waiting thread, hops[1] woke hops[0]...
};

// What a wait ended by this chain was a wait for: data when a data worker
// or the pin-memory thread is on it; else by the first hop: the autograd
// thread -> backward, a CUDA thread -> GPU sync, any other thread of the
// job -> its CPU work.  kNone with no hops.
WaitOn ClassifyChain(const std::vector<uint32_t>& hops, const ThreadRoles& roles);

// The threads that can be on a chain behind `driver`'s waits: those that
// woke it, those that woke them, up to kMaxWakeHops (from pass 1's wake
// graph).  Pass 2 keeps off-CPU intervals of these threads only.
absl::flat_hash_set<uint32_t> ThreadsThatCanBeOnAChain(const ThreadActivity& activity, uint32_t driver);

// The off-CPU intervals of the threads on chains, within the steps.
class ThreadTimelines {
 public:
  void Add(uint32_t tid, const OffCpuInterval& interval) { by_thread_[tid].push_back(interval); }
  // Sorts; call once after the last Add.
  void Finish();

  // The chain behind a wait of `wakee` from `start_ns` to `wake_ns` that
  // `waker` ended: a relay hop (pin-memory or other thread, or a worker
  // thread that another thread of its process woke) is followed to the
  // thread that ended its longest wait among those that ended within the
  // wait, before it woke the next hop.
  // An untraced waker (not in `roles`) gives no chain.
  WaitChain Follow(uint32_t wakee, uint64_t start_ns, uint64_t wake_ns, uint32_t waker,
                   const ThreadRoles& roles) const;

  // A block I/O request `tid` issued, in flight over [start_ns, end_ns).
  void AddBlockIo(uint32_t tid, uint64_t start_ns, uint64_t end_ns);

  // Adds what `tid` was doing over [from, to) to `out` (sums to to - from).
  // Blocked time (outside futex and mmap/munmap) while its own block I/O
  // was in flight is kDisk.
  void AddStates(uint32_t tid, uint64_t from, uint64_t to, HopStates& out) const;

  size_t size() const;

 private:
  struct Interval {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
  };
  // How much of [from, to) `tid` had block I/O in flight.
  uint64_t BlockIoOverlap(uint32_t tid, uint64_t from, uint64_t to) const;

  absl::flat_hash_map<uint32_t, std::vector<OffCpuInterval>> by_thread_;
  // Per thread, its requests' in-flight time; after Finish, a sorted union.
  absl::flat_hash_map<uint32_t, std::vector<Interval>> block_io_;
};

// One hop's share of the GPU-idle time of one cause: the thread, its place
// in the chain (0 = the direct waker) and what it did meanwhile.
struct WaitVia {
  IdleCause cause = IdleCause::kCount;
  uint8_t hop = 0;
  bool last = false;  // the end of its chain: the thread whose work was waited for
  uint32_t tid = 0;
  uint64_t ns = 0;  // GPU-idle time of `cause` spent waiting on this chain
  HopStates states{};  // adds up to ns
};

// Adds `from` into `into`, merging rows of the same (cause, hop, last, tid).
void MergeVia(std::vector<WaitVia>& into, const std::vector<WaitVia>& from);

}  // namespace gpuos
