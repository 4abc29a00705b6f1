// The launching thread's and its process's activity as compact time spans,
// which the per-step breakdown sweeps over.  32 bytes a span: a trace's
// CUDA API calls, GPU activities and off-CPU intervals of one process fit in
// memory even for long runs, where the protobuf events would not.
#pragma once

#include <cstdint>

namespace gpuos {

enum class SpanKind : uint8_t {
  kCudaApi,          // a: CudaApiClass; b: 1 when a memcpy whose GPU copy touched pageable memory; id: correlation;
                     // c: kApi* bits below
  kDataRange,        // an NVTX range named like a data fetch
  kMunmap,           // bytes: length
  kMmap,             // bytes: length
  kOffCpuBlocked,    // a: v1::OffCpuCause; b: 1 munmap, 2 mmap, 0 other syscall; id: syscall nr (or ~0u);
                     // c: WaitOn; bytes: 1 + the index of its wakeup chain, 0 none (the collector's)
  kOffCpuRunqueue,   // the run-queue tail of a blocked interval (woken, waiting for a CPU)
  kOffCpuPreempted,  // switched out while runnable
  kGpuKernel,        // id: stream; a: 1 for a collective's kernel (NCCL: communication.h)
  kGpuMemcpy,        // a: v1::MemcpyDirection; b: src v1::MemoryKind; c: dst kind; id: stream; bytes
  kGpuMemset,        // id: stream; bytes
  kBlockIo,          // a block I/O request the thread issued, issue to completion; a: 1 read, 0 other; bytes
};

// kCudaApi's c: the call copies host memory to the device (the CPU hands
// the GPU data it made: a batch, an environment's observations); the
// thread's next CUDA call does.
inline constexpr uint8_t kApiCopiesToDevice = 1;
inline constexpr uint8_t kApiNextCopiesToDevice = 2;

struct TimelineSpan {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t id = 0;
  SpanKind kind = SpanKind::kCudaApi;
  uint8_t a = 0;
  uint8_t b = 0;
  uint8_t c = 0;
};

}  // namespace gpuos
