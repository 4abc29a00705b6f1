// --flight-trigger slow-step=Nx: tells the flight recorder to dump when a
// training step takes more than N times the median of the steps before it.
// Steps are what the recording sees live from the shim: NVTX ranges named
// like steps (the report's default step regex: "step 12", "Batch 3",
// "ProfilerStep#5"...), their duration; without any, the Python hook's
// "optimizer.step" ranges, a step being the time from one's return to the
// next in the same process (with several optimizers, the returns that end an
// iteration: cupti_shim/optimizer_step_cycle.h).  Each process has its own median over its last
// kHistory steps; a trace without either kind of range never triggers.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "analysis/step_name_matcher.h"
#include "cupti_shim/optimizer_step_cycle.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class SlowStepTrigger {
 public:
  static constexpr size_t kHistory = 64;
  // Steps a process must have before its median counts.
  static constexpr size_t kMinSteps = 5;
  // After a trigger, this many steps of that process pass before the next.
  static constexpr uint32_t kCooldownSteps = 10;

  explicit SlowStepTrigger(double factor);

  // The step `event` ends, described, when it is a slow one.
  std::optional<std::string> Observe(const v1::Event& event);

 private:
  struct ProcessSteps {
    std::deque<uint64_t> durations;  // the last kHistory steps
    gpuos_capture::OptimizerStepCycle optimizers;
    uint64_t last_optimizer_end_ns = 0;
    uint64_t steps = 0;
    uint64_t quiet_until_step = 0;
  };
  std::optional<std::string> OnStep(uint32_t pid, uint64_t duration_ns, const std::string& name);

  double factor_;
  StepNameMatcher step_names_;
  bool saw_step_ranges_ = false;
  std::map<uint32_t, ProcessSteps> processes_;
};

}  // namespace gpuos
