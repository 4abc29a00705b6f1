// Counting what the job already does; see job_practices.h.
#include "analysis/job_practices.h"

#include "absl/strings/match.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "analysis/cuda_api_class.h"

namespace gpuos {

bool JobPractices::GraphsInUse(uint64_t measured_steps) const {
  if (graph_launches > 0 && graph_launches >= measured_steps) return true;
  return kernels > 0 && 2 * graph_kernels >= kernels;
}

JobPracticeTally::JobPracticeTally(const StepPlan& plan, const v1::TraceHeader& header) : pid_(plan.pid) {
  practices_.online_cpus = header.online_cpus();
  // The same steps the summaries use: those not warmup, or all of them when
  // every step is warmup.
  const bool any_measured =
      std::any_of(plan.steps.begin(), plan.steps.end(), [](const StepWindow& w) { return !w.warmup; });
  for (const StepWindow& w : plan.steps) {
    if (w.warmup && any_measured) continue;
    windows_.emplace_back(w.start_ns, w.end_ns);
  }
  std::sort(windows_.begin(), windows_.end());
}

bool JobPracticeTally::InMeasuredStep(uint64_t ts) const {
  auto it = std::upper_bound(windows_.begin(), windows_.end(), std::make_pair(ts, UINT64_MAX));
  return it != windows_.begin() && ts < std::prev(it)->second;
}

void JobPracticeTally::Add(const v1::Event& e) {
  if (e.pid() != pid_ || windows_.empty()) return;
  switch (e.payload_case()) {
    case v1::Event::kCudaApi: {
      const std::string& name = e.cuda_api().name();
      if (ClassifyCudaApi(name) != CudaApiClass::kLaunch || !InMeasuredStep(e.ts_ns())) break;
      const std::string_view base = StripCudaApiSuffixes(name);
      if (base == "cudaGraphLaunch" || base == "cuGraphLaunch") {
        ++practices_.graph_launches;
      } else {
        ++practices_.kernel_launches;
      }
      break;
    }
    case v1::Event::kGpuKernel:
      if (!InMeasuredStep(e.ts_ns())) break;
      ++practices_.kernels;
      if (e.gpu_kernel().graph_id() != 0) ++practices_.graph_kernels;
      break;
    case v1::Event::kGpuMemcpy: {
      const v1::GpuMemcpy& m = e.gpu_memcpy();
      if (m.direction() != v1::MEMCPY_HTOD || !InMeasuredStep(e.ts_ns())) break;
      ++practices_.htod_copies;
      if (m.src_kind() == v1::MEMORY_PINNED) ++practices_.htod_pinned;
      if (m.async()) ++practices_.htod_async;
      break;
    }
    default:
      break;
  }
}

}  // namespace gpuos
