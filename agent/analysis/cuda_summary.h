// Totals of a trace's CUDA and NVTX events (from cupti_shim/): kernels, top
// kernels, memcpys by direction and memory kinds, memsets, API calls, syncs,
// the launch-to-start delay of kernels, NVTX ranges by name, and each
// process's shim status.  Built in one streaming pass.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/latency_histogram.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

struct NamedTotals {
  std::string name;
  std::string domain;  // NVTX only; "" is the default domain
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
};

struct MemcpyTotals {
  v1::MemcpyDirection direction = v1::MEMCPY_UNKNOWN;
  v1::MemoryKind src_kind = v1::MEMORY_UNKNOWN;
  v1::MemoryKind dst_kind = v1::MEMORY_UNKNOWN;
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t total_ns = 0;
  // bytes / time on the GPU, in GB/s (1e9 bytes).
  double gb_per_s() const { return total_ns ? static_cast<double>(bytes) / total_ns : 0.0; }
};

struct ShimProcessStatus {
  uint32_t pid = 0;
  bool cupti_active = false;
  bool nvtx_active = false;
  std::string cupti_status;
  uint64_t events_sent = 0;
  uint64_t dropped = 0;  // queue full + send failed + CUPTI's own
};

struct CudaSummary {
  uint64_t kernel_count = 0;
  uint64_t kernel_total_ns = 0;
  std::vector<NamedTotals> kernels;  // by name, ranked by total_ns
  std::vector<MemcpyTotals> memcpy;  // by (direction, src, dst), ranked by total_ns
  uint64_t memset_count = 0;
  uint64_t memset_bytes = 0;
  uint64_t memset_total_ns = 0;
  std::vector<NamedTotals> api;   // CUDA API calls by name, ranked by total_ns
  std::vector<NamedTotals> sync;  // by kind name
  // GPU start minus the start of the API call that launched it (matched by
  // correlation id within a process).
  LatencyHistogram launch_delay;
  uint64_t kernels_without_launch = 0;
  std::vector<NamedTotals> nvtx;  // by (name, domain), ranked by total_ns
  uint64_t nvtx_marks = 0;
  std::vector<ShimProcessStatus> shims;
  // API calls recorded by eBPF uprobes on libcuda (attach without the shim).
  uint64_t uprobe_api_calls = 0;
  // Uprobe API calls and no GPU record at all: no GPU-side timing.
  bool cpu_side_only() const {
    return uprobe_api_calls > 0 && kernel_count == 0 && memcpy.empty() && memset_count == 0 && sync.empty();
  }
  bool empty() const {
    return kernel_count == 0 && memcpy.empty() && memset_count == 0 && api.empty() && nvtx.empty() &&
           shims.empty();
  }
};

class CudaSummaryBuilder {
 public:
  CudaSummaryBuilder();
  void Add(const v1::Event& event);
  CudaSummary Finish();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

const char* MemcpyDirectionName(v1::MemcpyDirection direction);
const char* MemoryKindName(v1::MemoryKind kind);
const char* SyncKindName(v1::GpuSync::Kind kind);

}  // namespace gpuos
