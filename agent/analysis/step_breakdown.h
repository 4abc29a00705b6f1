// One training step's time taken apart: what the driving thread did, how
// long it was off the CPU and why, what the GPU did, why the GPU was idle,
// and the stage view.  Every partition below adds up to the step's wall
// time exactly (in ns); the sums and counts beside them are marked as such.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/gpu_idle_attribution.h"
#include "analysis/step_stages.h"
#include "analysis/step_timeline.h"
#include "analysis/wakeup_chain.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// The launching thread's wall time in the step, a partition by priority:
// an instant inside a CUDA API call goes to that call's class (sync over
// copy over launch over the rest, when calls nest), else to data_wait when
// inside a data-fetch NVTX range, else to other.
struct CpuParts {
  uint64_t sync_ns = 0;            // *Synchronize calls
  uint64_t copy_api_ns = 0;        // cudaMemcpy*/cuMemcpy*, the whole call (a synchronous copy's wait for the GPU included)
  uint64_t launch_api_ns = 0;      // kernel and graph launch calls: dispatch
  uint64_t other_cuda_api_ns = 0;  // any other CUDA API call, memsets and allocations included
  uint64_t data_wait_ns = 0;       // inside a data-fetch range, outside CUDA API calls
  // Outside data-fetch ranges and CUDA API calls: running Python, the
  // framework (autograd, the optimizer's CPU side, the allocator) or the
  // model's CPU work -- or off the CPU there (blocked, preempted, in
  // munmap...).  OffCpuParts says how much of each part was off the CPU.
  uint64_t other_ns = 0;
  uint64_t total() const {
    return sync_ns + copy_api_ns + launch_api_ns + other_cuda_api_ns + data_wait_ns + other_ns;
  }
  // Not a part of the partition above: of other_cuda_api_ns, the time in
  // calls that take memory from the driver or give it back (cudaMalloc,
  // cudaFree: CudaApiClass::kAllocate).
  uint64_t allocate_api_ns = 0;
};

// The launching thread's off-CPU time in the step by cause.  Orthogonal to
// CpuParts: it overlaps them.  A blocked interval is split at its wakeup:
// the blocked part goes to its cause, the run-queue tail to runqueue_ns.
struct OffCpuParts {
  uint64_t futex_ns = 0;
  uint64_t page_fault_ns = 0;
  uint64_t mmap_munmap_ns = 0;  // any off-CPU time inside an mmap or munmap call, run-queue tail included
  uint64_t syscall_ns = 0;      // blocked in other syscalls
  uint64_t unknown_ns = 0;
  uint64_t preempted_ns = 0;  // switched out while runnable
  uint64_t runqueue_ns = 0;   // woken, waiting for a CPU
  uint64_t total() const {
    return futex_ns + page_fault_ns + mmap_munmap_ns + syscall_ns + unknown_ns + preempted_ns + runqueue_ns;
  }
  // Not a part of the partition above: of page_fault_ns, syscall_ns and
  // unknown_ns, the time with block I/O requests the thread issued in
  // flight -- waiting for disk.
  uint64_t disk_ns = 0;
};

struct MemcpyPart {
  v1::MemcpyDirection direction = v1::MEMCPY_UNKNOWN;
  v1::MemoryKind src_kind = v1::MEMORY_UNKNOWN;
  v1::MemoryKind dst_kind = v1::MEMORY_UNKNOWN;
  uint64_t count = 0;  // copies that started in the step
  uint64_t bytes = 0;  // of those
  uint64_t ns = 0;     // GPU time inside the step (copies on several streams each count)
};

// The GPU work of the launching thread's process (every stream and device).
struct GpuParts {
  // A partition of the step: at least one compute kernel runs (any kernel
  // but a collective's) / only collectives' kernels run (NCCL: the GPU
  // communicates, or waits in the collective for the other ranks; copies
  // may run beside them) / a memcpy but no kernel / a memset only / nothing.
  uint64_t kernel_busy_ns = 0;
  uint64_t comm_only_ns = 0;
  uint64_t copy_only_ns = 0;
  uint64_t memset_only_ns = 0;
  uint64_t idle_ns = 0;
  // Sums over activities, clipped to the step (concurrent work adds up).
  uint64_t kernel_ns = 0;       // every kernel, collectives' included
  uint64_t comm_kernel_ns = 0;  // collectives' kernels
  uint64_t memcpy_ns = 0;
  uint64_t memset_ns = 0;
  uint64_t copy_overlap_ns = 0;  // wall time with a memcpy and a kernel running at once
  uint64_t htod_ns = 0;
  uint64_t htod_on_kernel_stream_ns = 0;  // HtoD copy time on streams that also ran kernels in the step
  uint64_t kernels_started = 0;           // kernels starting in the step
  uint64_t kernels_started_ns = 0;        // their full durations
  uint64_t comm_kernels_started = 0;      // of kernels_started, collectives' kernels
  uint64_t comm_kernels_started_ns = 0;   // their full durations
  std::vector<MemcpyPart> memcpy;         // by (direction, src, dst)
  uint32_t idle_stretches = 0;
  uint64_t longest_idle_ns = 0;
  // Of idle_ns / idle_stretches: the stretches that began while the
  // launching thread waited in a sync call (it had let the GPU's queue
  // run dry), each counted whole, until the GPU's next work.
  uint64_t idle_after_sync_ns = 0;
  uint32_t idle_stretches_after_sync = 0;
  // Of idle_ns: the GPU idle the thread's allocation calls account for --
  // inside them, and in the stretches that began inside them until the
  // GPU's next work (a cudaFree waits for the device to finish its queue;
  // the GPU then waits for the CPU to fill it again).
  uint64_t idle_allocation_ns = 0;
  uint32_t idle_stretches_after_allocation = 0;
  uint64_t total() const { return kernel_busy_ns + comm_only_ns + copy_only_ns + memset_only_ns + idle_ns; }
  // Kernels that started in the step but collectives' ones: what the GPU
  // computed, and their mean length (a collective's kernel lasts as long as
  // it waits for the slowest rank).
  uint64_t compute_kernels_started() const { return kernels_started - comm_kernels_started; }
  uint64_t compute_kernels_started_ns() const { return kernels_started_ns - comm_kernels_started_ns; }
};

struct ApiCounts {  // launching thread's calls that started in the step
  uint64_t launch = 0;
  uint64_t memcpy = 0;
  uint64_t pageable_memcpy = 0;
  uint64_t sync = 0;
  // Syncs with a launch of the thread since its previous sync and another
  // after it, in the step: each makes the CPU wait for the queue to drain
  // in the middle of the step's work (a value or a size read back:
  // .item(), nonzero, a boolean mask), and a CUDA graph cannot span it.
  // A runtime sync and the driver sync nested in it count once.
  uint64_t syncs_between_launches = 0;
  // Calls that take memory from the driver or give it back (cudaMalloc,
  // cudaFree; a runtime call and the driver call nested in it count once).
  // PyTorch's caching allocator makes none in a steady step unless its
  // cache is emptied (torch.cuda.empty_cache()) or cannot serve a request.
  uint64_t allocations = 0;
};

struct MmTotals {  // calls that started in the step; ns clipped to the step
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t ns = 0;
};

struct BlockIoCounts {  // block I/O requests issued in the step
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t ns = 0;  // their issue-to-completion times, summed
};

struct SwitchTotals {  // context switches whose switch-out is in the step
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
  uint64_t runqueue_ns = 0;  // the run-queue wait of those switches
};

// OS costs by role: the launching thread; data workers (threads named like
// data-loader workers, and every thread of the launching process's
// descendant processes); every other traced thread.
struct StepOsCosts {
  SwitchTotals launching;
  SwitchTotals workers;
  SwitchTotals others;
  uint64_t page_faults = 0;  // launching thread, by the window's first fault
  uint64_t major_faults = 0;
  MmTotals mmap;    // launching thread
  MmTotals munmap;  // launching thread
  // Block I/O issued by the same three roles.
  BlockIoCounts block_io_launching;
  BlockIoCounts block_io_workers;
  BlockIoCounts block_io_others;
  // Processes the launching process started in the step (a DataLoader's
  // workers, which each epoch's iter() starts again unless
  // persistent_workers is set), and how many of them exec'd the same
  // program anew (the spawn start method: each a new interpreter importing
  // torch).  A child that exec'd another program (nvidia-smi) is not
  // counted.
  uint32_t child_starts = 0;
  uint32_t child_execs = 0;
};

struct StepRecord {
  uint64_t index = 0;  // from the range's name ("step 12" -> 12), else its ordinal
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool warmup = false;
  // Set when a repeating-sequence step was left out of the summaries: why.
  std::string left_out;
  // Whether CUPTI's device records were on for the whole step (always, in a
  // trace recorded without --capture; analysis/capture_detail.h).  GPU
  // parts of a step without detail are empty, not zero work.
  bool cuda_detail = true;
  // The first step of a capture window whose opening subscribed CUPTI
  // again: the subscription (milliseconds) ran inside it, so the GPU-side
  // summaries leave it out where its window has other steps; its detail is
  // kept and shown.
  bool window_start = false;
  uint64_t duration_ns() const { return end_ns - start_ns; }

  CpuParts cpu;
  OffCpuParts off_cpu;
  GpuParts gpu;
  ApiCounts api;
  StepOsCosts os;
  IdleByCause gpu_idle{};  // GPU idle time by cause; adds up to gpu.idle_ns
  StageTimes stages{};     // adds up to the duration
  // With no kernel or memset running: the thread inside a pageable memcpy
  // call / inside mmap or munmap.  What pinned memory would save.
  uint64_t exposed_pageable_copy_ns = 0;
  uint64_t exposed_mm_ns = 0;
  // The wakeup chains behind the GPU-idle time of the causes that are a
  // wait on another thread (IsWaitOnThread): per (cause, hop, thread), the
  // idle time and what that thread was doing meanwhile.  For each cause,
  // the hop-0 rows add up to the part of gpu_idle[cause] whose waits have a
  // traced waker.
  std::vector<WaitVia> via;
  // Filled by BreakDownStep for the caller to turn into `via`: the
  // GPU-idle stretches charged to such a cause while the thread waited on
  // the chain (span.bytes - 1).
  struct ChainSlice {
    uint32_t chain = 0;
    IdleCause cause = IdleCause::kCount;
    uint64_t from_ns = 0;
    uint64_t to_ns = 0;
  };
  std::vector<ChainSlice> chain_slices;
};

// The timing parts, API counts and mmap/munmap totals of the step
// [start_ns, end_ns), from the spans that overlap it (any order; each is
// clipped to the step).  Context switches and page faults come from
// events, not spans: the caller fills `os.launching/workers/others` and
// page faults.
StepRecord BreakDownStep(uint64_t start_ns, uint64_t end_ns, const std::vector<const TimelineSpan*>& spans);

// The part of each stage (GPU idle, so never GPU compute) spent waiting for
// disk: the driving thread blocked on its own reads (data loading) or
// writes (OS overhead), and its waits on a wakeup chain whose last thread
// -- the one whose work was waited for -- was itself blocked on its own
// block I/O meanwhile (a data worker reading its samples: data loading).
StageTimes DiskPartOfStages(const StepRecord& step);

// Adds every time, count and memcpy row of `step` into `total`
// (longest_idle_ns takes the maximum).  index/start/end are left alone.
void AddStepTotals(StepRecord& total, const StepRecord& step);

}  // namespace gpuos
