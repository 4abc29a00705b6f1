// CUPTI activity records -> encoded gpuos.v1.Event bytes (wire_encoder.h),
// one record at a time.  Pure functions of the record and what the caller
// passes in (pid, API names), so that tests can build records in memory and
// check every field without CUPTI or a GPU.  Also here: which CUDA API calls
// become events at all, and under what name.
//
// Timestamps go through the context's ClockConverter when it has one (CUPTI
// stamping with its own clock, cupti_timestamps.h), and are taken as they
// come otherwise (a CLOCK_MONOTONIC timestamp callback).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cupti_api_call_rings.h"
#include "cupti_clock_converter.h"

namespace gpuos_shim {

// The name of a CUDA API callback id, as the event should show it ("" when
// unknown).  `driver`: CUPTI_CB_DOMAIN_DRIVER_API, else the runtime domain.
using ApiNameResolver = std::function<std::string_view(bool driver, uint32_t cbid)>;

struct RecordEncodeContext {
  // pid of GPU-side records (kernels, copies, sets, syncs): the process the
  // shim runs in.  API records carry their own.
  uint32_t pid = 0;
  ApiNameResolver api_name;
  // Demangled kernel name; when empty, DemangleKernelName() is used.
  std::function<std::string(const char* mangled)> kernel_name;
  // Maps record timestamps onto CLOCK_MONOTONIC; null: they are already.
  const ClockConverter* clock = nullptr;
};

enum class RecordEncodeOutcome {
  kEncoded,
  // A kind the shim does not turn into events; `out` is left empty.
  kIgnoredKind,
  // CUPTI could not time it (start or end 0, e.g. no device memory for
  // timestamps); `out` is left empty, since an event at time 0 would only
  // mislead.  Callers count these.
  kNoTimestamps,
};

// Encodes one record into `out` (replacing its contents).
RecordEncodeOutcome EncodeActivityRecord(const CUpti_Activity* record,
                                         const RecordEncodeContext& context, std::string* out);

// Encodes an API call the shim timed itself (cupti_api_call_rings.h) as the
// same event its RUNTIME or DRIVER activity record would give; pid from the
// context.  Its timestamps are CLOCK_MONOTONIC already: context.clock is
// not used.
RecordEncodeOutcome EncodeTimedApiCall(const TimedApiCall& call, const RecordEncodeContext& context,
                                       std::string* out);

// abi::__cxa_demangle, or the name unchanged when it is not a mangled C++
// name; "" for null.
std::string DemangleKernelName(const char* mangled);

// Whether calls of this API (a cuptiGetCallbackName name such as
// "cudaMemcpyAsync_v3020" or "cuMemAlloc_v2") become events: those that
// launch work, copy, set memory, allocate, free or wait for the GPU.
// Queries, getters, setters and graph construction do not.
bool IsTracedApiName(std::string_view callback_name);

// The name an API event shows: runtime callback names lose CUPTI's version
// tag ("cudaMemcpyAsync_v3020" -> "cudaMemcpyAsync",
// "cudaLaunchKernel_ptsz_v7000" -> "cudaLaunchKernel_ptsz"); driver names
// are real symbols ("cuMemAlloc_v2") and stay as they are.
std::string ApiDisplayName(bool driver, std::string_view callback_name);

}  // namespace gpuos_shim
