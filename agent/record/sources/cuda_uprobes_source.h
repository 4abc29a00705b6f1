// The CUDA driver uprobe source's user side (bpf/cuda_uprobes.bpf.c): the
// driver API calls of chosen processes, probed per process on their
// libcuda, the fallback when the CUPTI shim cannot be put into a running
// process.  Loaded on demand, by BpfSession::AttachCudaUprobes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "record/sources/bpf_source.h"

namespace gpuos {

class CudaUprobesSource : public BpfSource {
 public:
  static std::unique_ptr<CudaUprobesSource> Create();
  // Probes the listed driver functions (bpf/cuda_uprobes.h) of library_path
  // in process pid; how many were probed (names at one address count once).
  virtual absl::StatusOr<int> ProbeProcess(pid_t pid, const std::string& library_path) = 0;
};

// The driver function a cuda_uprobes record names (bpf/cuda_uprobes.h's
// list), e.g. "cuLaunchKernel_ptsz"; nullptr for an id not in the list.
const char* CudaUprobeFunctionName(uint32_t function);

}  // namespace gpuos
