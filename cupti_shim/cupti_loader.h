// Finds libcupti at run time and resolves the functions the shim calls into
// a table, so that the shim links no CUPTI library: a process that never
// initialises CUDA never loads it, and a process that already carries a
// copy (PyTorch's wheel, through libtorch_cuda) shares that copy instead of
// loading a second one that would fight it for the one CUPTI subscriber
// slot.  A missing library or symbol is an ordinary failure with a reason
// a user can act on, never a crash.
//
// Not absl::Status here: the shim is injected into arbitrary processes and
// carries no Abseil (see wire_encoder.h for the same reasoning on protobuf).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

namespace gpuos_shim {

// Every CUPTI entry point the shim uses.  Required ones are never null in a
// table LoadCupti() returns; optional ones are null where the loaded CUPTI
// predates them, and callers must check.
struct CuptiApi {
  // Required.
  CUptiResult (*GetVersion)(uint32_t* version);
  CUptiResult (*GetResultString)(CUptiResult result, const char** str);
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain domain, uint32_t cbid, const char** name);
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                           void* userdata);
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle subscriber);
  CUptiResult (*EnableCallback)(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc callback);
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed);
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind kind);
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind kind);
  CUptiResult (*ActivityGetNextRecord)(uint8_t* buffer, size_t valid_size, CUpti_Activity** record);
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext context, uint32_t stream_id,
                                              size_t* dropped);
  CUptiResult (*ActivityFlushAll)(uint32_t flag);
  CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType type);

  // Optional.
  CUptiResult (*ActivityEnableRuntimeApi)(CUpti_CallbackId cbid, uint8_t enable);
  CUptiResult (*ActivityEnableDriverApi)(CUpti_CallbackId cbid, uint8_t enable);
  CUptiResult (*ActivityEnableAllSyncRecords)(uint8_t enable);
  CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute attribute, size_t* value_size,
                                      void* value);
  // For detaching mid-run (cupti_finalize.cc): cuptiFinalize is only safe
  // from the exit callsite of a CUDA API call, which a callback on every
  // API of the domain catches.
  CUptiResult (*EnableDomain)(uint32_t enable, CUpti_SubscriberHandle subscriber,
                              CUpti_CallbackDomain domain);
  CUptiResult (*Finalize)();
  // CUPTI's own clock, for mapping records stamped with it onto
  // CLOCK_MONOTONIC (cupti_timestamps.h).
  CUptiResult (*GetTimestamp)(uint64_t* timestamp);

  uint32_t version = 0;      // cuptiGetVersion(): 19..28 for CUDA 12.x, 130000+ for 13.x
  std::string library_path;  // the file the functions came from
  bool was_loaded = false;   // found already in the process (not loaded by us)
};

// Oldest CUPTI whose activity records we read: the record fields the encoder
// uses sit at the same offsets from CUDA 12.0's CUPTI onwards (checked with
// static_asserts in cupti_record_encoder.cc).
inline constexpr uint32_t kMinCuptiApiVersion = 19;

struct CuptiLoadResult {
  const CuptiApi* api = nullptr;  // null on failure; lives for the whole process
  std::string error;              // one line, set on failure
};

// Finds libcupti, in this order, stopping at the first found:
//   1. a copy already loaded in the process (RTLD_NOLOAD: libcupti.so.13,
//      libcupti.so.12, libcupti.so);
//   2. the file named by $GPUOS_CUPTI_LIBRARY, when set (and nothing else);
//   3. libcupti.so.13 through the dynamic linker's usual search;
//   4. /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 and
//      /usr/local/cuda/lib64/libcupti.so.13.
// Then resolves every function above.  Thread-safe; the first call does the
// work and later calls return the same result.  Never unloads the library.
CuptiLoadResult LoadCupti();

// "CUPTI_ERROR_..." for a result code, through the loaded library when it
// can, else the number.
std::string CuptiResultName(const CuptiApi* api, CUptiResult result);

}  // namespace gpuos_shim
