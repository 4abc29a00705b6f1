// The priority that turns a thread's state into one GPU-idle cause; see
// gpu_idle_attribution.h.
#include "analysis/gpu_idle_attribution.h"

namespace gpuos {

IdleCause AttributeIdleInstant(const ThreadInstant& t) {
  switch (t.api) {
    case ThreadApiState::kSync: return IdleCause::kSynchronizing;
    case ThreadApiState::kPageableCopy: return IdleCause::kPageableMemcpy;
    case ThreadApiState::kCopy: return IdleCause::kCopyOther;
    case ThreadApiState::kLaunch: return IdleCause::kLaunching;
    case ThreadApiState::kMemset:
    case ThreadApiState::kOther: return IdleCause::kOtherCudaApi;
    case ThreadApiState::kAllocate: return IdleCause::kAllocating;
    case ThreadApiState::kNone: break;
  }
  if (t.mm == ThreadMmState::kMunmap) return IdleCause::kMunmap;
  if (t.mm == ThreadMmState::kMmap) return IdleCause::kMmap;
  const bool blocked_not_futex = t.off_cpu == ThreadOffCpuState::kPageFault ||
                                 t.off_cpu == ThreadOffCpuState::kSyscall || t.off_cpu == ThreadOffCpuState::kUnknown;
  if (blocked_not_futex && t.disk != ThreadDiskState::kNone) {
    return t.disk == ThreadDiskState::kRead ? IdleCause::kDiskRead : IdleCause::kDiskWrite;
  }
  switch (t.off_cpu) {
    case ThreadOffCpuState::kPageFault: return IdleCause::kPageFaults;
    case ThreadOffCpuState::kPreempted:
    case ThreadOffCpuState::kRunqueue: return IdleCause::kPreemptedRunqueue;
    case ThreadOffCpuState::kFutex:
    case ThreadOffCpuState::kSyscall:
    case ThreadOffCpuState::kUnknown: {
      const bool futex = t.off_cpu == ThreadOffCpuState::kFutex;
      if (t.in_data_range || t.wait_on == WaitOn::kData) {
        return futex ? IdleCause::kDataWaitFutex : IdleCause::kDataWaitBlocked;
      }
      switch (t.wait_on) {
        case WaitOn::kBackward: return IdleCause::kWaitBackward;
        case WaitOn::kGpuSync: return IdleCause::kWaitGpuSync;
        case WaitOn::kJobThreads: return IdleCause::kWaitJobThreads;
        case WaitOn::kWorkerProcesses: return IdleCause::kWaitWorkerProcesses;
        case WaitOn::kData:
        case WaitOn::kNone: break;
      }
      return futex ? IdleCause::kFutexOther : IdleCause::kOtherSyscalls;
    }
    case ThreadOffCpuState::kOnCpu: break;
  }
  if (t.in_data_range) return IdleCause::kDataWaitRunning;
  return t.away_from_cuda ? IdleCause::kHostWork : IdleCause::kOtherCpu;
}

const char* IdleCauseName(IdleCause cause) {
  switch (cause) {
    case IdleCause::kSynchronizing: return "synchronizing";
    case IdleCause::kPageableMemcpy: return "pageable memcpy";
    case IdleCause::kCopyOther: return "copy (other)";
    case IdleCause::kLaunching: return "launching";
    case IdleCause::kOtherCudaApi: return "other CUDA API";
    case IdleCause::kAllocating: return "allocating or freeing memory (cudaMalloc, cudaFree)";
    case IdleCause::kMunmap: return "munmap";
    case IdleCause::kMmap: return "mmap";
    case IdleCause::kDiskRead: return "waiting for disk (reads)";
    case IdleCause::kDiskWrite: return "waiting for disk (writes)";
    case IdleCause::kPageFaults: return "page faults";
    case IdleCause::kPreemptedRunqueue: return "preempted / run queue";
    case IdleCause::kDataWaitFutex: return "waiting for data (futex)";
    case IdleCause::kDataWaitBlocked: return "waiting for data (blocked)";
    case IdleCause::kDataWaitRunning: return "waiting for data (running)";
    case IdleCause::kWaitBackward: return "waiting for backward (autograd thread)";
    case IdleCause::kWaitGpuSync: return "waiting for a GPU sync (CUDA thread)";
    case IdleCause::kWaitJobThreads: return "waiting for the job's threads (CPU work)";
    case IdleCause::kWaitWorkerProcesses: return "waiting for the job's worker processes (not a DataLoader's)";
    case IdleCause::kFutexOther: return "futex wait (not data)";
    case IdleCause::kOtherSyscalls: return "other syscalls (blocked)";
    case IdleCause::kHostWork: return "the job's CPU work, no CUDA call (running)";
    case IdleCause::kOtherCpu: return "other CPU work (running)";
    case IdleCause::kCount: break;
  }
  return "unknown";
}

const char* IdleCauseKey(IdleCause cause) {
  switch (cause) {
    case IdleCause::kSynchronizing: return "synchronizing";
    case IdleCause::kPageableMemcpy: return "pageable_memcpy";
    case IdleCause::kCopyOther: return "copy_other";
    case IdleCause::kLaunching: return "launching";
    case IdleCause::kOtherCudaApi: return "other_cuda_api";
    case IdleCause::kAllocating: return "allocating";
    case IdleCause::kMunmap: return "munmap";
    case IdleCause::kMmap: return "mmap";
    case IdleCause::kDiskRead: return "disk_read";
    case IdleCause::kDiskWrite: return "disk_write";
    case IdleCause::kPageFaults: return "page_faults";
    case IdleCause::kPreemptedRunqueue: return "preempted_runqueue";
    case IdleCause::kDataWaitFutex: return "data_wait_futex";
    case IdleCause::kDataWaitBlocked: return "data_wait_blocked";
    case IdleCause::kDataWaitRunning: return "data_wait_running";
    case IdleCause::kWaitBackward: return "wait_backward";
    case IdleCause::kWaitGpuSync: return "wait_gpu_sync";
    case IdleCause::kWaitJobThreads: return "wait_job_threads";
    case IdleCause::kWaitWorkerProcesses: return "wait_worker_processes";
    case IdleCause::kFutexOther: return "futex_other";
    case IdleCause::kOtherSyscalls: return "other_syscalls";
    case IdleCause::kHostWork: return "host_work";
    case IdleCause::kOtherCpu: return "other_cpu";
    case IdleCause::kCount: break;
  }
  return "unknown";
}

}  // namespace gpuos
