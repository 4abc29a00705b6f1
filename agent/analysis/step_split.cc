// Steps cut in two; see step_split.h.
#include "analysis/step_split.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuos {

void SplitStepsAt(std::vector<StepWindow>& steps, const std::vector<uint64_t>& cut_at, const char* suffix) {
  std::vector<StepWindow> out;
  out.reserve(steps.size() * 2);
  for (size_t k = 0; k < steps.size(); ++k) {
    if (cut_at[k] == 0) {
      out.push_back(steps[k]);
      continue;
    }
    StepWindow extra = steps[k];
    extra.end_ns = cut_at[k];
    absl::StrAppend(&extra.left_out, suffix);
    StepWindow iteration = steps[k];
    iteration.start_ns = cut_at[k];
    iteration.warmup = false;
    iteration.left_out.clear();
    out.push_back(std::move(extra));
    out.push_back(std::move(iteration));
  }
  const uint64_t first_index = steps.front().index;
  for (size_t k = 0; k < out.size(); ++k) out[k].index = first_index + k;
  steps = std::move(out);
}

}  // namespace gpuos
