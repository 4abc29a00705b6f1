// Turns one raw ring-buffer record (bpf/*.h layouts) into stream Events,
// through the decoder its source lists for its kind (record/sources/): one
// event for most kinds, one per call for a batch of mmap/munmap calls
// (GPUOS_EV_MM_CALLS).  Records are checked against their declared sizes;
// a short or unknown record is rejected, never read past its end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

enum class DecodeResult { kOk, kTooShort, kUnknownKind };

// Decodes the record into *event and calls emit(*event) once per event it
// holds; emits nothing unless the whole record is valid.
DecodeResult DecodeBpfRecord(const void* data, size_t size, v1::Event* event,
                             absl::FunctionRef<void(v1::Event&)> emit);

}  // namespace gpuos
