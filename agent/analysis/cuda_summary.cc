// CUDA and NVTX totals; see cuda_summary.h.
#include "analysis/cuda_summary.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace gpuos {

const char* MemcpyDirectionName(v1::MemcpyDirection direction) {
  switch (direction) {
    case v1::MEMCPY_HTOD: return "HtoD";
    case v1::MEMCPY_DTOH: return "DtoH";
    case v1::MEMCPY_HTOA: return "HtoA";
    case v1::MEMCPY_ATOH: return "AtoH";
    case v1::MEMCPY_ATOA: return "AtoA";
    case v1::MEMCPY_ATOD: return "AtoD";
    case v1::MEMCPY_DTOA: return "DtoA";
    case v1::MEMCPY_DTOD: return "DtoD";
    case v1::MEMCPY_HTOH: return "HtoH";
    case v1::MEMCPY_PTOP: return "PtoP";
    default: return "unknown";
  }
}

const char* MemoryKindName(v1::MemoryKind kind) {
  switch (kind) {
    case v1::MEMORY_PAGEABLE: return "pageable";
    case v1::MEMORY_PINNED: return "pinned";
    case v1::MEMORY_DEVICE: return "device";
    case v1::MEMORY_ARRAY: return "array";
    case v1::MEMORY_MANAGED: return "managed";
    case v1::MEMORY_DEVICE_STATIC: return "device_static";
    case v1::MEMORY_MANAGED_STATIC: return "managed_static";
    default: return "unknown";
  }
}

const char* SyncKindName(v1::GpuSync::Kind kind) {
  switch (kind) {
    case v1::GpuSync::EVENT: return "event";
    case v1::GpuSync::STREAM_WAIT_EVENT: return "stream_wait_event";
    case v1::GpuSync::STREAM: return "stream";
    case v1::GpuSync::CONTEXT: return "context";
    default: return "unknown";
  }
}

namespace {

void AddTo(NamedTotals& t, uint64_t duration) {
  ++t.count;
  t.total_ns += duration;
  t.max_ns = std::max(t.max_ns, duration);
}

template <typename Map>
std::vector<NamedTotals> Ranked(Map& map) {
  std::vector<NamedTotals> out;
  out.reserve(map.size());
  for (auto& [key, totals] : map) out.push_back(std::move(totals));
  std::sort(out.begin(), out.end(), [](const NamedTotals& a, const NamedTotals& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

bool IsLaunch(const std::string& api_name) {
  return api_name.find("Launch") != std::string::npos || api_name.find("GraphLaunch") != std::string::npos;
}

}  // namespace

struct CudaSummaryBuilder::Impl {
  CudaSummary out;
  absl::flat_hash_map<std::string, NamedTotals> kernels;
  std::map<std::tuple<int, int, int>, MemcpyTotals> memcpy;
  absl::flat_hash_map<std::string, NamedTotals> api;
  absl::flat_hash_map<std::string, NamedTotals> sync;
  std::map<std::pair<std::string, std::string>, NamedTotals> nvtx;
  std::map<uint32_t, ShimProcessStatus> shims;
  // Launch calls and kernels waiting for their partner, by (pid, correlation).
  // Each entry is dropped once matched, so memory follows the records in
  // flight, not the length of the trace.
  absl::flat_hash_map<uint64_t, uint64_t> launch_start;
  absl::flat_hash_map<uint64_t, uint64_t> kernel_start;

  static uint64_t Key(uint32_t pid, uint32_t correlation) {
    return (static_cast<uint64_t>(pid) << 32) | correlation;
  }

  void OnKernel(const v1::Event& e) {
    const auto& k = e.gpu_kernel();
    ++out.kernel_count;
    out.kernel_total_ns += k.duration_ns();
    NamedTotals& t = kernels[k.name()];
    if (t.name.empty()) t.name = k.name();
    AddTo(t, k.duration_ns());
    uint64_t key = Key(e.pid(), k.correlation_id());
    auto it = launch_start.find(key);
    if (it != launch_start.end()) {
      out.launch_delay.Add(e.ts_ns() > it->second ? e.ts_ns() - it->second : 0);
      launch_start.erase(it);
    } else {
      kernel_start[key] = e.ts_ns();
    }
  }

  void OnApi(const v1::Event& e) {
    const auto& a = e.cuda_api();
    if (a.from_uprobe()) ++out.uprobe_api_calls;
    NamedTotals& t = api[a.name()];
    if (t.name.empty()) t.name = a.name();
    AddTo(t, a.duration_ns());
    if (!IsLaunch(a.name())) return;
    uint64_t key = Key(e.pid(), a.correlation_id());
    auto it = kernel_start.find(key);
    if (it != kernel_start.end()) {
      out.launch_delay.Add(it->second > e.ts_ns() ? it->second - e.ts_ns() : 0);
      kernel_start.erase(it);
    } else {
      launch_start[key] = e.ts_ns();
    }
  }

  void OnMemcpy(const v1::GpuMemcpy& m) {
    MemcpyTotals& t = memcpy[{m.direction(), m.src_kind(), m.dst_kind()}];
    t.direction = m.direction();
    t.src_kind = m.src_kind();
    t.dst_kind = m.dst_kind();
    ++t.count;
    t.bytes += m.bytes();
    t.total_ns += m.duration_ns();
  }

  void OnShimStats(const v1::Event& e) {
    const auto& s = e.shim_stats();
    ShimProcessStatus& p = shims[e.pid()];
    p.pid = e.pid();
    p.cupti_active = s.cupti_active();
    p.nvtx_active = s.nvtx_active();
    p.cupti_status = s.cupti_status();
    p.events_sent = s.events_sent();
    p.dropped = s.dropped_queue_full() + s.dropped_send_failed() + s.cupti_dropped_records();
  }

  void Add(const v1::Event& e) {
    switch (e.payload_case()) {
      case v1::Event::kGpuKernel: OnKernel(e); break;
      case v1::Event::kCudaApi: OnApi(e); break;
      case v1::Event::kGpuMemcpy: OnMemcpy(e.gpu_memcpy()); break;
      case v1::Event::kGpuMemset:
        ++out.memset_count;
        out.memset_bytes += e.gpu_memset().bytes();
        out.memset_total_ns += e.gpu_memset().duration_ns();
        break;
      case v1::Event::kGpuSync: {
        const char* name = SyncKindName(e.gpu_sync().kind());
        NamedTotals& t = sync[name];
        t.name = name;
        AddTo(t, e.gpu_sync().duration_ns());
        break;
      }
      case v1::Event::kNvtxRange: {
        const auto& r = e.nvtx_range();
        NamedTotals& t = nvtx[{r.name(), r.domain()}];
        t.name = r.name();
        t.domain = r.domain();
        AddTo(t, r.duration_ns());
        break;
      }
      case v1::Event::kNvtxMark: ++out.nvtx_marks; break;
      case v1::Event::kShimStats: OnShimStats(e); break;
      default: break;
    }
  }
};

CudaSummaryBuilder::CudaSummaryBuilder() : impl_(std::make_shared<Impl>()) {}

void CudaSummaryBuilder::Add(const v1::Event& event) { impl_->Add(event); }

CudaSummary CudaSummaryBuilder::Finish() {
  Impl& i = *impl_;
  CudaSummary out = std::move(i.out);
  out.kernels = Ranked(i.kernels);
  out.api = Ranked(i.api);
  out.sync = Ranked(i.sync);
  out.nvtx = Ranked(i.nvtx);
  for (auto& [key, totals] : i.memcpy) out.memcpy.push_back(totals);
  std::sort(out.memcpy.begin(), out.memcpy.end(),
            [](const MemcpyTotals& a, const MemcpyTotals& b) { return a.total_ns > b.total_ns; });
  out.kernels_without_launch = i.kernel_start.size();
  for (auto& [pid, status] : i.shims) out.shims.push_back(status);
  return out;
}

}  // namespace gpuos
