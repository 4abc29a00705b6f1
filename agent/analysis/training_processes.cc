// Which processes ran a training loop of their own; see training_processes.h.
#include "analysis/training_processes.h"

#include <algorithm>

#include "analysis/step_options.h"
#include "cupti_shim/optimizer_step_cycle.h"

namespace gpuos {

void TrainingMarkCounter::Add(const v1::Event& e) {
  switch (e.payload_case()) {
    case v1::Event::kProcessStart:
      by_pid_.erase(e.pid());  // a reused pid starts afresh
      break;
    case v1::Event::kNvtxMark:
      if (e.nvtx_mark().domain() == kBackwardUprobeDomain && e.nvtx_mark().name() == kDefaultBackwardRangeName) {
        ++by_pid_[e.pid()].backward_uprobes;
      }
      break;
    case v1::Event::kNvtxRange: {
      const v1::NvtxRange& r = e.nvtx_range();
      if (r.duration_ns() == 0) break;
      if (gpuos_capture::OptimizerNumber(r.name(), kDefaultOptimizerRangeName) != 0) {
        ++by_pid_[e.pid()].optimizer_steps;
      } else if (r.name() == kDefaultBackwardRangeName) {
        ++by_pid_[e.pid()].backward_ranges;
      }
      break;
    }
    default:
      break;
  }
}

std::vector<uint32_t> TrainingMarkCounter::TrainingProcesses() const {
  std::vector<uint32_t> out;
  for (const auto& [pid, m] : by_pid_) {
    if (std::max({m.optimizer_steps, m.backward_ranges, m.backward_uprobes}) >= kMinTrainingMarks) {
      out.push_back(pid);
    }
  }
  if (out.size() < 2) out.clear();
  return out;
}

}  // namespace gpuos
