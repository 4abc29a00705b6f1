// Turns one raw ring-buffer record (bpf/*.h layouts) into a stream Event.
// Records are checked against their declared sizes; a short or unknown
// record is rejected, never read past its end.
#pragma once

#include <cstddef>

#include "gpuos_trace.pb.h"

namespace gpuos {

enum class DecodeResult { kOk, kTooShort, kUnknownKind };

DecodeResult DecodeBpfRecord(const void* data, size_t size, v1::Event* event);

}  // namespace gpuos
