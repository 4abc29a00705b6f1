// The few lines a recording ends with on stderr: how much was recorded,
// what the CUDA shim said (CUPTI stepping aside, lost events), drops, and
// where the trace is.
#pragma once

#include <cstdint>
#include <string>

namespace gpuos {

class Recording;
class ShimListener;

// `shim_listener` may be null (no CUDA side).
void PrintRecordingSummary(const Recording& recording, const ShimListener* shim_listener,
                           const std::string& output_path);

std::string HumanBytes(uint64_t bytes);

}  // namespace gpuos
