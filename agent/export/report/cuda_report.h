// Renders a CudaSummary: text tables for the terminal report, and the
// "nvtx" and "cuda" members of the JSON report.
#pragma once

#include <ostream>

#include "analysis/cuda_summary.h"
#include "export/report/json_writer.h"

namespace gpuos {

// Nothing is written when the trace has no CUDA or NVTX events.
void WriteCudaTextReport(const CudaSummary& summary, std::ostream& out);

// Writes the keys "nvtx" and "cuda" into the JSON object being written.
void WriteCudaJsonMembers(const CudaSummary& summary, JsonWriter& json);

}  // namespace gpuos
