// See slow_step_trigger.h.
#include "record/slow_step_trigger.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/step_options.h"

namespace gpuos {

SlowStepTrigger::SlowStepTrigger(double factor)
    : factor_(factor), step_names_(*StepNameMatcher::Create(kDefaultStepRegex, "step regex")) {}

std::optional<std::string> SlowStepTrigger::Observe(const v1::Event& event) {
  if (!event.has_nvtx_range()) return std::nullopt;
  const v1::NvtxRange& range = event.nvtx_range();
  if (step_names_.Matches(range.name())) {
    if (!saw_step_ranges_) {
      // Step ranges rule from now on, as in the report.
      saw_step_ranges_ = true;
      processes_.clear();
    }
    return OnStep(event.pid(), range.duration_ns(), range.name());
  }
  const uint32_t optimizer = gpuos_capture::OptimizerNumber(range.name(), kDefaultOptimizerRangeName);
  if (saw_step_ranges_ || optimizer == 0) return std::nullopt;
  ProcessSteps& p = processes_[event.pid()];
  // With several optimizers (a GAN's two), only the returns that end an
  // iteration, as the report counts them.
  const gpuos_capture::OptimizerStepCycle::Outcome o = p.optimizers.Add(optimizer);
  if (!o.ends_step) return std::nullopt;
  const uint64_t end = event.ts_ns() + range.duration_ns();
  if (o.began_at >= 0) {
    p.last_optimizer_end_ns = end;  // the provisional steps were no steps: measure from here
    return std::nullopt;
  }
  const uint64_t previous = p.last_optimizer_end_ns;
  if (end <= previous) return std::nullopt;  // out of order: not a step
  p.last_optimizer_end_ns = end;
  if (previous == 0) return std::nullopt;
  return OnStep(event.pid(), end - previous, absl::StrCat("the step ending at ", range.name()));
}

std::optional<std::string> SlowStepTrigger::OnStep(uint32_t pid, uint64_t duration_ns, const std::string& name) {
  ProcessSteps& p = processes_[pid];
  ++p.steps;
  std::optional<std::string> slow;
  if (p.durations.size() >= kMinSteps && p.steps >= p.quiet_until_step) {
    std::vector<uint64_t> sorted(p.durations.begin(), p.durations.end());
    auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
    std::nth_element(sorted.begin(), middle, sorted.end());
    const uint64_t median = *middle;
    if (median > 0 && static_cast<double>(duration_ns) > factor_ * static_cast<double>(median)) {
      slow = absl::StrFormat("slow step: \"%s\" of pid %d took %.1f ms, %.1fx the median of %.1f ms", name, pid,
                             duration_ns / 1e6, static_cast<double>(duration_ns) / median, median / 1e6);
      p.quiet_until_step = p.steps + kCooldownSteps;
    }
  }
  p.durations.push_back(duration_ns);
  if (p.durations.size() > kHistory) p.durations.pop_front();
  return slow;
}

}  // namespace gpuos
