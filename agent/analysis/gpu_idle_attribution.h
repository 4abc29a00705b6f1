// Why the GPU sat idle: every instant of a GPU-idle stretch inside a step is
// charged to one cause, read from what the driving thread (driving_thread.h)
// was doing at that instant, and, when it was blocked, from who ended the
// wait (wakeup_chain.h): waiting on another thread of the job is charged to
// the work waited for, not to the OS.  The thread's state is a few overlapping facts (in a CUDA
// API call? in a data-fetch NVTX range? in mmap/munmap? off the CPU, and
// why?); AttributeIdleInstant turns them into a single cause by a fixed
// priority, so the causes of one stretch add up to its length exactly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gpuos {

// The CUDA API call the thread is in; when calls nest (a runtime call around
// its driver call) the highest value wins.
enum class ThreadApiState : uint8_t {
  kNone = 0,
  kOther,         // any other CUDA API call
  kAllocate,      // taking memory from the driver or giving it back: cudaMalloc, cudaFree...
  kMemset,
  kLaunch,
  kCopy,          // cudaMemcpy*/cuMemcpy* whose GPU copy is not known to touch pageable memory
  kPageableCopy,  // ... whose GPU copy (same correlation id) has a pageable source or destination
  kSync,          // *Synchronize
};

enum class ThreadMmState : uint8_t { kNone = 0, kMmap, kMunmap };

// Block I/O requests the thread itself issued that are in flight (issued,
// not completed); a read among them wins.
enum class ThreadDiskState : uint8_t { kNone = 0, kWrite, kRead };

enum class ThreadOffCpuState : uint8_t {
  kOnCpu = 0,
  kFutex,      // blocked in futex()
  kPageFault,  // blocked resolving a page fault (outside any syscall)
  kSyscall,    // blocked in another syscall
  kUnknown,    // blocked, cause not known
  kPreempted,  // switched out while runnable, until switched back in
  kRunqueue,   // woken after blocking, waiting for a CPU
};

// What a blocked thread's wait was for, from the chain of wakers that ended
// it (wakeup_chain.h).
enum class WaitOn : uint8_t {
  kNone = 0,    // not known: no waker, an untraced one, or an interrupt
  kData,        // a data worker or the pin-memory thread
  kBackward,    // the autograd engine thread
  kGpuSync,     // a CUDA thread (the event handler, the driver's threads)
  kJobThreads,  // another thread of the job: its pools, its own threads
  kWorkerProcesses,  // the job's worker processes that are not a DataLoader's
};

struct ThreadInstant {
  ThreadApiState api = ThreadApiState::kNone;
  bool in_data_range = false;  // inside an NVTX range named like a data fetch
  ThreadMmState mm = ThreadMmState::kNone;
  ThreadOffCpuState off_cpu = ThreadOffCpuState::kOnCpu;
  WaitOn wait_on = WaitOn::kNone;  // when blocked (futex, syscall, unknown)
  ThreadDiskState disk = ThreadDiskState::kNone;
  // Inside a stretch of more than kHostWorkGapNs with no CUDA API call that
  // ends in a copy to the device (in a step whose calls are recorded): the
  // job's own CPU work, not the framework's code between launches.
  bool away_from_cuda = false;
};

// The framework's dispatch between two launches takes tens of
// microseconds.  A thread that runs longer with no CUDA call and then
// copies data to the device made that data on the CPU: an environment's
// step, a batch loaded in the training thread, tokenizing.  No CUDA graph
// shortens that.  A long stretch that ends in a launch is left to the
// framework: its Python-side work between kernels (an optimizer's per-
// parameter bookkeeping, clip_grad_norm_'s grouping, an EMA update over
// tensor lists) runs 0.3-2 ms with no call on the H200 (a diffusion
// training step, 2026-11-29), and fusing or capturing that code does
// shorten it.
inline constexpr uint64_t kHostWorkGapNs = 200'000;

// In the order AttributeIdleInstant tests them.
enum class IdleCause : uint8_t {
  // 1. A CUDA API call: what the driver does inside it is its own business.
  kSynchronizing = 0,
  kPageableMemcpy,
  kCopyOther,
  kLaunching,
  kOtherCudaApi,  // including cudaMemset*
  kAllocating,    // cudaMalloc, cudaFree and kin (CudaApiClass::kAllocate)
  // 2. mmap/munmap, on or off the CPU.
  kMunmap,
  kMmap,
  // 3. Off the CPU for a reason the OS owns, inside or outside a data fetch:
  //    blocked (in a syscall, a page fault, or for a reason not known, not
  //    in futex) while block I/O requests the thread issued were in flight,
  kDiskRead,   // ... reads among them: loading data from storage
  kDiskWrite,  // ... writes only (a checkpoint, logs)
  //    or else
  kPageFaults,
  kPreemptedRunqueue,  // preempted, or woken and waiting for a CPU
  // 4. Inside a data-fetch range, or blocked until a data worker or the
  //    pin-memory thread woke it.
  kDataWaitFutex,    // blocked in futex (waiting on a worker or a queue)
  kDataWaitBlocked,  // blocked in another syscall (read, poll, recv... of the loader)
  kDataWaitRunning,  // on the CPU: loading and preprocessing in this thread
  // 5. Blocked until another thread of the job ended the wait.
  kWaitBackward,    // the autograd engine thread (loss.backward())
  kWaitGpuSync,     // a CUDA thread (a blocking sync outside an API record)
  kWaitJobThreads,  // any other thread of the job: CPU work in its pools
  kWaitWorkerProcesses,  // the job's worker processes, not a DataLoader's (ThreadRole::kWorkerProcess)
  // 6. Elsewhere.
  kFutexOther,     // blocked in futex, no traced thread woke it (a timeout, an untraced waker)
  kOtherSyscalls,  // blocked in another syscall outside a data fetch
  kHostWork,       // running, away from CUDA calls (away_from_cuda): the job's own CPU work
  kOtherCpu,       // running other code between CUDA calls: Python, the framework's dispatch
  kCount,
};

inline constexpr size_t kIdleCauseCount = static_cast<size_t>(IdleCause::kCount);
using IdleByCause = std::array<uint64_t, kIdleCauseCount>;

IdleCause AttributeIdleInstant(const ThreadInstant& thread);

// "waiting for data (futex)": for people.
const char* IdleCauseName(IdleCause cause);
// "data_wait_futex": the JSON key.
const char* IdleCauseKey(IdleCause cause);

// Waiting for data: on the loader, in a data fetch, or on the thread's own
// reads from storage.
inline bool IsDataWait(IdleCause cause) {
  return cause == IdleCause::kDataWaitFutex || cause == IdleCause::kDataWaitBlocked ||
         cause == IdleCause::kDataWaitRunning || cause == IdleCause::kDiskRead;
}

// Causes charged to a wait another thread ended (the chain is shown).
inline bool IsWaitOnThread(IdleCause cause) {
  return cause == IdleCause::kDataWaitFutex || cause == IdleCause::kDataWaitBlocked ||
         cause == IdleCause::kWaitBackward || cause == IdleCause::kWaitGpuSync || cause == IdleCause::kWaitJobThreads ||
         cause == IdleCause::kWaitWorkerProcesses;
}

}  // namespace gpuos
