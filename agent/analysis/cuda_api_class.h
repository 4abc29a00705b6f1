// What a CUDA runtime or driver API call does to the calling thread, judged
// from its name alone (CUPTI names such as "cudaLaunchKernel_v7000" or
// "cuMemcpyHtoDAsync_v2_ptsz"): the per-step breakdown needs to know whether
// the launching thread was dispatching work, copying, or waiting for the GPU.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpuos {

enum class CudaApiClass : uint8_t {
  kOther = 0,  // everything else: allocation, events, stream/graph set-up...
  kLaunch,     // puts work on a stream: cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch...
  kSync,       // blocks the CPU until the GPU is done: *Synchronize
  kMemcpy,     // cudaMemcpy*, cuMemcpy* (synchronous or not)
  kMemset,     // cudaMemset*, cuMemset*
  // Takes device or pinned host memory from the driver or gives it back:
  // cudaMalloc*, cudaFree*, cudaHostAlloc, cuMemAlloc*, cuMemFree*, and the
  // virtual-memory calls of expandable segments (cuMemCreate, cuMemMap...).
  // A free waits for the whole device.  Not the stream-ordered *Async
  // calls, which neither wait nor go to the driver each time.
  kAllocate,
};

// `name` without CUPTI's version and per-thread-stream suffixes ("_v7000",
// "_v2", "_ptsz", "_ptds", in any order at the end).
std::string_view StripCudaApiSuffixes(std::string_view name);

// cudaStreamWaitEvent and cuStreamWaitEvent are kOther: they make a stream,
// not the CPU, wait.
CudaApiClass ClassifyCudaApi(std::string_view name);

const char* CudaApiClassName(CudaApiClass api_class);

// A driver copy call that names its direction as host to device
// (cuMemcpyHtoD_v2, cuMemcpyHtoDAsync_v2, and sequence tokens made from
// them); the runtime's calls (cudaMemcpyAsync) do not: their GPU records say.
bool NamesCopyToDevice(std::string_view name);

}  // namespace gpuos
