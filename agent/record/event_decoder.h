// Turns one raw ring-buffer record (bpf/*.h layouts) into a stream Event.
// Records are checked against their declared sizes; a short or unknown
// record is rejected, never read past its end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpuos_trace.pb.h"

namespace gpuos {

enum class DecodeResult { kOk, kTooShort, kUnknownKind };

DecodeResult DecodeBpfRecord(const void* data, size_t size, v1::Event* event);

// The driver function a cuda_uprobes record names (bpf/cuda_uprobes.h's
// list), e.g. "cuLaunchKernel_ptsz"; nullptr for an id not in the list.
const char* CudaUprobeFunctionName(uint32_t function);

}  // namespace gpuos
