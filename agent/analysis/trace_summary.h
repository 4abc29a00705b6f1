// Everything `gpuos-trace report` shows, computed in one streaming pass over
// a trace: the OS summary and the CUDA/NVTX summary.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "analysis/cuda_summary.h"
#include "analysis/os_summary.h"

namespace gpuos {

struct TraceSummary {
  OsSummary os;
  CudaSummary cuda;
};

// Like SummarizeTraceFile: a damaged file is summarized up to the damage,
// with os.read_error set.
absl::StatusOr<TraceSummary> SummarizeTrace(const std::string& path);

}  // namespace gpuos
