// CUPTI activity records -> encoded gpuos.v1.Event bytes (wire_encoder.h),
// one record at a time.  Pure functions of the record and what the caller
// passes in (pid, API names), so that tests can build records in memory and
// check every field without CUPTI or a GPU.  Also here: which CUDA API calls
// become events at all, and under what name.
//
// Timestamps are taken as they come: the shim registers a CLOCK_MONOTONIC
// timestamp callback with CUPTI before enabling any activity, so record
// start/end are already on the clock of every other event.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

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

// One function per record kind (CUDA 13 record versions; older CUPTIs'
// records share the prefix these read, see the .cc).  The kernel one serves
// both CUPTI_ACTIVITY_KIND_KERNEL and _CONCURRENT_KERNEL.
std::string EncodeKernel(const CUpti_ActivityKernel10& kernel, uint32_t pid,
                         const std::string& demangled_name);
std::string EncodeMemcpy(const CUpti_ActivityMemcpy6& copy, uint32_t pid);
std::string EncodeMemcpyPtoP(const CUpti_ActivityMemcpyPtoP4& copy, uint32_t pid);
std::string EncodeMemset(const CUpti_ActivityMemset4& set, uint32_t pid);
std::string EncodeSynchronization(const CUpti_ActivitySynchronization2& sync, uint32_t pid);
// CUPTI_ACTIVITY_KIND_RUNTIME and _DRIVER; pid/tid from the record (the
// shim asks CUPTI for system thread ids, so tid is the kernel's tid).
std::string EncodeApi(const CUpti_ActivityAPI& api, std::string_view name);

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
