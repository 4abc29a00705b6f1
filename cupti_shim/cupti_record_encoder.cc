// CUPTI activity records -> encoded gpuos.v1.Event bytes (see the header).
#include "cupti_record_encoder.h"

#include <cxxabi.h>

#include <cstddef>
#include <cstdlib>

#include "wire_encoder.h"

namespace gpuos_shim {
namespace {

// The shim may be handed an older libcupti already loaded in the process
// (PyTorch's CUDA 12 wheel), whose records are older struct versions.  New
// versions only append fields, so reading through the CUDA 13 structs is
// right as long as every field read here sits at the same offset in the
// versions CUDA 12.x emits.  These asserts are that promise; a field that
// moves in a future CUDA breaks the build, not the data.
#define GPUOS_SAME_OFFSET(new_type, old_type, field)                    \
  static_assert(offsetof(new_type, field) == offsetof(old_type, field), \
                #field " moved between " #old_type " and " #new_type)
#define GPUOS_KERNEL_FIELD(field)                                          \
  GPUOS_SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, field); \
  GPUOS_SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel8, field)
GPUOS_KERNEL_FIELD(registersPerThread);
GPUOS_KERNEL_FIELD(start);
GPUOS_KERNEL_FIELD(end);
GPUOS_KERNEL_FIELD(deviceId);
GPUOS_KERNEL_FIELD(contextId);
GPUOS_KERNEL_FIELD(streamId);
GPUOS_KERNEL_FIELD(gridX);
GPUOS_KERNEL_FIELD(gridY);
GPUOS_KERNEL_FIELD(gridZ);
GPUOS_KERNEL_FIELD(blockX);
GPUOS_KERNEL_FIELD(blockY);
GPUOS_KERNEL_FIELD(blockZ);
GPUOS_KERNEL_FIELD(staticSharedMemory);
GPUOS_KERNEL_FIELD(dynamicSharedMemory);
GPUOS_KERNEL_FIELD(correlationId);
GPUOS_KERNEL_FIELD(name);
GPUOS_KERNEL_FIELD(graphNodeId);
GPUOS_KERNEL_FIELD(graphId);
#undef GPUOS_KERNEL_FIELD
#define GPUOS_MEMCPY_FIELD(field) \
  GPUOS_SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, field)
GPUOS_MEMCPY_FIELD(copyKind);
GPUOS_MEMCPY_FIELD(srcKind);
GPUOS_MEMCPY_FIELD(dstKind);
GPUOS_MEMCPY_FIELD(flags);
GPUOS_MEMCPY_FIELD(bytes);
GPUOS_MEMCPY_FIELD(start);
GPUOS_MEMCPY_FIELD(end);
GPUOS_MEMCPY_FIELD(deviceId);
GPUOS_MEMCPY_FIELD(contextId);
GPUOS_MEMCPY_FIELD(streamId);
GPUOS_MEMCPY_FIELD(correlationId);
GPUOS_MEMCPY_FIELD(runtimeCorrelationId);
GPUOS_MEMCPY_FIELD(graphId);
#undef GPUOS_MEMCPY_FIELD
#define GPUOS_PTOP_FIELD(field) \
  GPUOS_SAME_OFFSET(CUpti_ActivityMemcpyPtoP4, CUpti_ActivityMemcpyPtoP3, field)
GPUOS_PTOP_FIELD(copyKind);
GPUOS_PTOP_FIELD(srcKind);
GPUOS_PTOP_FIELD(dstKind);
GPUOS_PTOP_FIELD(flags);
GPUOS_PTOP_FIELD(bytes);
GPUOS_PTOP_FIELD(start);
GPUOS_PTOP_FIELD(end);
GPUOS_PTOP_FIELD(deviceId);
GPUOS_PTOP_FIELD(contextId);
GPUOS_PTOP_FIELD(streamId);
GPUOS_PTOP_FIELD(srcDeviceId);
GPUOS_PTOP_FIELD(dstDeviceId);
GPUOS_PTOP_FIELD(correlationId);
GPUOS_PTOP_FIELD(graphId);
#undef GPUOS_PTOP_FIELD
#define GPUOS_MEMSET_FIELD(field) \
  GPUOS_SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, field)
GPUOS_MEMSET_FIELD(value);
GPUOS_MEMSET_FIELD(bytes);
GPUOS_MEMSET_FIELD(start);
GPUOS_MEMSET_FIELD(end);
GPUOS_MEMSET_FIELD(deviceId);
GPUOS_MEMSET_FIELD(contextId);
GPUOS_MEMSET_FIELD(streamId);
GPUOS_MEMSET_FIELD(correlationId);
GPUOS_MEMSET_FIELD(flags);
GPUOS_MEMSET_FIELD(memoryKind);
GPUOS_MEMSET_FIELD(graphId);
#undef GPUOS_MEMSET_FIELD
#define GPUOS_SYNC_FIELD(field) \
  GPUOS_SAME_OFFSET(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, field)
GPUOS_SYNC_FIELD(type);
GPUOS_SYNC_FIELD(start);
GPUOS_SYNC_FIELD(end);
GPUOS_SYNC_FIELD(correlationId);
GPUOS_SYNC_FIELD(contextId);
GPUOS_SYNC_FIELD(streamId);
GPUOS_SYNC_FIELD(cudaEventId);
#undef GPUOS_SYNC_FIELD
#undef GPUOS_SAME_OFFSET

uint64_t Duration(uint64_t start, uint64_t end) { return end > start ? end - start : 0; }

// Synchronization records mark fields that do not apply with all ones.
uint32_t ValidOrZero(uint32_t value) {
  return value == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : value;
}

bool HasTimestamps(uint64_t start, uint64_t end) { return start != 0 && end != 0; }

// A record's time on CLOCK_MONOTONIC.
struct Span {
  uint64_t start;
  uint64_t duration;
};
Span MonotonicSpan(uint64_t start, uint64_t end, const RecordEncodeContext& context) {
  if (context.clock == nullptr) return {start, Duration(start, end)};
  const uint64_t mapped_start = context.clock->ToMonotonic(start);
  return {mapped_start, Duration(mapped_start, context.clock->ToMonotonic(end))};
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::string DemangleKernelName(const char* mangled) {
  if (mangled == nullptr) return "";
  // Only "_Z..." is a mangled name; __cxa_demangle would read a plain C
  // kernel name such as "f" as a type ("float").
  if (mangled[0] != '_' || mangled[1] != 'Z') return mangled;
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) {
    free(demangled);
    return mangled;
  }
  std::string result(demangled);
  free(demangled);
  return result;
}

namespace {

// One function per record kind (CUDA 13 record versions; older CUPTIs'
// records share the prefix these read, see above).  The kernel one serves
// both CUPTI_ACTIVITY_KIND_KERNEL and _CONCURRENT_KERNEL.
std::string EncodeKernel(const CUpti_ActivityKernel10& kernel, Span span, uint32_t pid,
                         const std::string& demangled_name) {
  namespace f = field;
  ProtoWriter payload;
  payload.Uint(f::kKernelDuration, span.duration);
  payload.Text(f::kKernelName, demangled_name);
  payload.Uint(f::kKernelDevice, kernel.deviceId);
  payload.Uint(f::kKernelContext, kernel.contextId);
  payload.Uint(f::kKernelStream, kernel.streamId);
  payload.Uint(f::kKernelCorrelation, kernel.correlationId);
  payload.Int(f::kKernelGridX, kernel.gridX);
  payload.Int(f::kKernelGridY, kernel.gridY);
  payload.Int(f::kKernelGridZ, kernel.gridZ);
  payload.Int(f::kKernelBlockX, kernel.blockX);
  payload.Int(f::kKernelBlockY, kernel.blockY);
  payload.Int(f::kKernelBlockZ, kernel.blockZ);
  payload.Int(f::kKernelStaticShared, kernel.staticSharedMemory);
  // int32 in CUPTI, uint32 in the schema: a byte count is never negative.
  payload.Uint(f::kKernelDynamicShared, kernel.dynamicSharedMemory > 0
                                            ? static_cast<uint32_t>(kernel.dynamicSharedMemory)
                                            : 0);
  payload.Uint(f::kKernelRegisters, kernel.registersPerThread);
  payload.Uint(f::kKernelGraphId, kernel.graphId);
  payload.Uint(f::kKernelGraphNodeId, kernel.graphNodeId);
  return EncodeEvent(span.start, pid, 0, f::kEventGpuKernel, payload);
}

// The fields a copy record of every kind carries (memcpy and peer-to-peer).
// CUpti_ActivityMemcpyKind / _MemoryKind number their values as the schema's
// MemcpyDirection / MemoryKind do (checked in the unit test).
template <typename CopyRecord>
void AppendCopyFields(const CopyRecord& copy, Span span, ProtoWriter& payload) {
  namespace f = field;
  payload.Uint(f::kMemcpyDuration, span.duration);
  payload.Uint(f::kMemcpyBytes, copy.bytes);
  payload.Uint(f::kMemcpyDirection, copy.copyKind);
  payload.Uint(f::kMemcpySrcKind, copy.srcKind);
  payload.Uint(f::kMemcpyDstKind, copy.dstKind);
  payload.Bool(f::kMemcpyAsync, (copy.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0);
  payload.Uint(f::kMemcpyDevice, copy.deviceId);
  payload.Uint(f::kMemcpyContext, copy.contextId);
  payload.Uint(f::kMemcpyStream, copy.streamId);
  payload.Uint(f::kMemcpyGraphId, copy.graphId);
}

std::string EncodeMemcpy(const CUpti_ActivityMemcpy6& copy, Span span, uint32_t pid) {
  ProtoWriter payload;
  AppendCopyFields(copy, span, payload);
  // The runtime call (cudaMemcpy...) is what the API events show, so its id
  // joins them; a copy issued straight through the driver API has none and
  // joins the driver call instead.
  payload.Uint(field::kMemcpyCorrelation,
               copy.runtimeCorrelationId != 0 ? copy.runtimeCorrelationId : copy.correlationId);
  return EncodeEvent(span.start, pid, 0, field::kEventGpuMemcpy, payload);
}

std::string EncodeMemcpyPtoP(const CUpti_ActivityMemcpyPtoP4& copy, Span span, uint32_t pid) {
  ProtoWriter payload;
  AppendCopyFields(copy, span, payload);
  payload.Uint(field::kMemcpyCorrelation, copy.correlationId);
  payload.Uint(field::kMemcpySrcDevice, copy.srcDeviceId);
  payload.Uint(field::kMemcpyDstDevice, copy.dstDeviceId);
  return EncodeEvent(span.start, pid, 0, field::kEventGpuMemcpy, payload);
}

std::string EncodeMemset(const CUpti_ActivityMemset4& set, Span span, uint32_t pid) {
  namespace f = field;
  ProtoWriter payload;
  payload.Uint(f::kMemsetDuration, span.duration);
  payload.Uint(f::kMemsetBytes, set.bytes);
  payload.Uint(f::kMemsetValue, set.value);
  payload.Uint(f::kMemsetKind, set.memoryKind);
  payload.Bool(f::kMemsetAsync, (set.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0);
  payload.Uint(f::kMemsetDevice, set.deviceId);
  payload.Uint(f::kMemsetContext, set.contextId);
  payload.Uint(f::kMemsetStream, set.streamId);
  payload.Uint(f::kMemsetCorrelation, set.correlationId);
  payload.Uint(f::kMemsetGraphId, set.graphId);
  return EncodeEvent(span.start, pid, 0, f::kEventGpuMemset, payload);
}

std::string EncodeSynchronization(const CUpti_ActivitySynchronization2& sync, Span span,
                                  uint32_t pid) {
  namespace f = field;
  ProtoWriter payload;
  payload.Uint(f::kSyncDuration, span.duration);
  // CUpti_ActivitySynchronizationType numbers as GpuSync.Kind does.
  payload.Uint(f::kSyncKind, static_cast<uint32_t>(sync.type));
  payload.Uint(f::kSyncContext, ValidOrZero(sync.contextId));
  payload.Uint(f::kSyncStream, ValidOrZero(sync.streamId));
  payload.Uint(f::kSyncCorrelation, sync.correlationId);
  payload.Uint(f::kSyncEventId, ValidOrZero(sync.cudaEventId));
  // The record names no thread; the API call with the same correlation id
  // does.
  return EncodeEvent(span.start, pid, 0, f::kEventGpuSync, payload);
}

// CUPTI_ACTIVITY_KIND_RUNTIME and _DRIVER; pid/tid from the record (the
// shim asks CUPTI for system thread ids, so tid is the kernel's tid).
std::string EncodeApi(const CUpti_ActivityAPI& api, Span span, std::string_view name) {
  namespace f = field;
  ProtoWriter payload;
  payload.Uint(f::kApiDuration, span.duration);
  payload.Text(f::kApiName, name);
  payload.Bool(f::kApiDriver, api.kind == CUPTI_ACTIVITY_KIND_DRIVER);
  payload.Uint(f::kApiCbid, api.cbid);
  payload.Uint(f::kApiCorrelation, api.correlationId);
  // A CUresult or cudaError_t, stored unsigned by CUPTI.
  payload.Int(f::kApiReturn, static_cast<int32_t>(api.returnValue));
  return EncodeEvent(span.start, api.processId, api.threadId, f::kEventCudaApi, payload);
}

}  // namespace

RecordEncodeOutcome EncodeActivityRecord(const CUpti_Activity* record,
                                         const RecordEncodeContext& context, std::string* out) {
  out->clear();
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& kernel = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (!HasTimestamps(kernel.start, kernel.end)) return RecordEncodeOutcome::kNoTimestamps;
      std::string name =
          context.kernel_name ? context.kernel_name(kernel.name) : DemangleKernelName(kernel.name);
      *out = EncodeKernel(kernel, MonotonicSpan(kernel.start, kernel.end, context), context.pid, name);
      return RecordEncodeOutcome::kEncoded;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& copy = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!HasTimestamps(copy.start, copy.end)) return RecordEncodeOutcome::kNoTimestamps;
      *out = EncodeMemcpy(copy, MonotonicSpan(copy.start, copy.end, context), context.pid);
      return RecordEncodeOutcome::kEncoded;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto& copy = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      if (!HasTimestamps(copy.start, copy.end)) return RecordEncodeOutcome::kNoTimestamps;
      *out = EncodeMemcpyPtoP(copy, MonotonicSpan(copy.start, copy.end, context), context.pid);
      return RecordEncodeOutcome::kEncoded;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& set = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!HasTimestamps(set.start, set.end)) return RecordEncodeOutcome::kNoTimestamps;
      *out = EncodeMemset(set, MonotonicSpan(set.start, set.end, context), context.pid);
      return RecordEncodeOutcome::kEncoded;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& sync = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      if (!HasTimestamps(sync.start, sync.end)) return RecordEncodeOutcome::kNoTimestamps;
      *out = EncodeSynchronization(sync, MonotonicSpan(sync.start, sync.end, context), context.pid);
      return RecordEncodeOutcome::kEncoded;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& api = *reinterpret_cast<const CUpti_ActivityAPI*>(record);
      if (!HasTimestamps(api.start, api.end)) return RecordEncodeOutcome::kNoTimestamps;
      const bool driver = api.kind == CUPTI_ACTIVITY_KIND_DRIVER;
      std::string_view name = context.api_name ? context.api_name(driver, api.cbid) : "";
      *out = EncodeApi(api, MonotonicSpan(api.start, api.end, context), name);
      return RecordEncodeOutcome::kEncoded;
    }
    default:
      return RecordEncodeOutcome::kIgnoredKind;
  }
}

RecordEncodeOutcome EncodeTimedApiCall(const TimedApiCall& call, const RecordEncodeContext& context,
                                       std::string* out) {
  out->clear();
  if (!HasTimestamps(call.start_ns, call.end_ns)) return RecordEncodeOutcome::kNoTimestamps;
  // The same event an activity record of the call would give.
  CUpti_ActivityAPI api{};
  api.kind = call.driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = call.cbid;
  api.processId = context.pid;
  api.threadId = call.tid;
  api.correlationId = call.correlation_id;
  api.returnValue = static_cast<uint32_t>(call.return_value);
  std::string_view name = context.api_name ? context.api_name(call.driver, call.cbid) : "";
  // Stamped by the shim on CLOCK_MONOTONIC: never mapped.
  *out = EncodeApi(api, Span{call.start_ns, Duration(call.start_ns, call.end_ns)}, name);
  return RecordEncodeOutcome::kEncoded;
}

bool IsTracedApiName(std::string_view name) {
  // Getters, setters, queries and graph construction mention copies and
  // allocations without doing them ("cudaGraphAddMemcpyNode",
  // "cuMemGetAllocationGranularity", "cudaEventQuery", "cuBinaryFree").
  static constexpr std::string_view kExcluded[] = {
      "Get", "Set", "Query", "Node", "Occupancy", "Attribute", "Allocation", "Binary"};
  for (std::string_view word : kExcluded) {
    if (Contains(name, word)) return false;
  }
  if (Contains(name, "Graph") && !Contains(name, "GraphLaunch")) return false;

  // Kernels, host functions and graphs; copies; sets; allocation (pools and
  // host memory too); pinning; managed-memory migration; the host waiting
  // for the GPU; a stream waiting for another.
  static constexpr std::string_view kWork[] = {
      "Launch",       "Memcpy",         "Memset",   "Malloc",      "Alloc",          "Free",
      "HostRegister", "HostUnregister", "Prefetch", "Synchronize", "StreamWaitEvent"};
  for (std::string_view word : kWork) {
    if (Contains(name, word)) return true;
  }
  // The driver's virtual memory management, which PyTorch's expandable
  // segments allocate with.
  static constexpr std::string_view kVirtualMemory[] = {"cuMemCreate", "cuMemRelease", "cuMemMap",
                                                        "cuMemUnmap", "cuMemAddressReserve"};
  for (std::string_view prefix : kVirtualMemory) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

std::string ApiDisplayName(bool driver, std::string_view name) {
  if (driver) return std::string(name);
  // "_v" followed only by digits (at least four: CUPTI's "_v3020", "_v7000",
  // "_v11000") ends a runtime callback name.
  const size_t tag = name.rfind("_v");
  if (tag == std::string_view::npos || tag == 0) return std::string(name);
  std::string_view digits = name.substr(tag + 2);
  if (digits.size() < 4) return std::string(name);
  for (char c : digits) {
    if (c < '0' || c > '9') return std::string(name);
  }
  return std::string(name.substr(0, tag));
}

}  // namespace gpuos_shim
