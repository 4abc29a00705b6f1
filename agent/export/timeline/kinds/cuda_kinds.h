// The CUDA kinds of timeline records (the table: timeline/record_kinds.h):
// API calls on their thread, kernels, copies and memsets on their GPU
// stream's track (they count toward the device's busy %), host waits for
// the GPU on the process's "CUDA sync waits" track.  A call and the GPU work
// of its correlation id are the two ends of a flow arrow (FlowTable).
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"

namespace gpuos {

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": CUPTI's runtime callback
// names end in "_v" and a version of four or more digits.  Other names
// (driver calls such as "cuMemcpyHtoD_v2" are real symbols) are kept.
std::string_view CudaApiDisplayName(std::string_view name);

struct CudaApiKind {
  static constexpr RecordKind kKind = RecordKind::kCudaApi;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kCudaApi;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kCuda;
  static constexpr const char* kNames[] = {"(unnamed)"};
  struct Payload {
    uint32_t correlation_id;
    uint32_t cbid;
    int32_t return_value;
    uint32_t driver;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) { return {FlowEnd::Role::kCudaCall, p.correlation_id}; }
};

struct GpuKernelKind {
  static constexpr RecordKind kKind = RecordKind::kGpuKernel;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kGpuKernel;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kGpu;
  static constexpr bool kGpuBusy = true;
  static constexpr const char* kNames[] = {"(unnamed)"};
  struct Payload {
    int32_t grid[3];
    int32_t block[3];
    int32_t static_shared_bytes;
    uint32_t dynamic_shared_bytes;
    uint32_t correlation_id;
    uint32_t registers_per_thread;
    uint32_t graph_id;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) { return {FlowEnd::Role::kCudaWork, p.correlation_id}; }
};

struct GpuMemcpyKind {
  static constexpr RecordKind kKind = RecordKind::kGpuMemcpy;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kGpuMemcpy;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kGpu;
  static constexpr bool kGpuBusy = true;
  // By MemcpyDirection.
  static constexpr const char* kNames[] = {"Memcpy unknown", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                           "Memcpy AtoH",    "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
                                           "Memcpy DtoD",    "Memcpy HtoH", "Memcpy PtoP"};
  struct Payload {
    uint64_t bytes;
    uint32_t graph_id;
    uint32_t correlation_id;
    uint8_t direction;  // low byte of the MemcpyDirection
    uint8_t src_kind;   // low byte of the MemoryKind
    uint8_t dst_kind;
    uint8_t async;
    uint32_t src_device;
    uint32_t dst_device;
    uint32_t unused;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) { return {FlowEnd::Role::kCudaWork, p.correlation_id}; }
};

struct GpuMemsetKind {
  static constexpr RecordKind kKind = RecordKind::kGpuMemset;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kGpuMemset;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kGpu;
  static constexpr bool kGpuBusy = true;
  static constexpr const char* kNames[] = {"Memset"};
  struct Payload {
    uint64_t bytes;
    uint32_t graph_id;
    uint32_t correlation_id;
    uint32_t value;
    uint8_t memory_kind;  // low byte of the MemoryKind
    uint8_t async;
    uint16_t unused;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) { return {FlowEnd::Role::kCudaWork, p.correlation_id}; }
};

struct GpuSyncKind {
  static constexpr RecordKind kKind = RecordKind::kGpuSync;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kGpuSync;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kCuda;
  // By GpuSync.Kind.
  static constexpr const char* kNames[] = {"sync wait (unknown)", "sync wait (event)",
                                           "sync wait (stream wait event)", "sync wait (stream)",
                                           "sync wait (context)"};
  struct Payload {
    uint32_t context;
    uint32_t correlation_id;
    uint32_t kind;
    uint32_t stream;
    uint32_t cuda_event_id;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
  static FlowEnd Flow(const Payload& p) { return {FlowEnd::Role::kCudaWork, p.correlation_id}; }
};

}  // namespace gpuos
