// Which optimizer steps end a training step, in scripts with several
// optimizers: the rule for the Python hook's "optimizer.step" ranges, shared
// by the shim's live step count (capture windows, capture_control.cc) and
// the analysis' steps from marks (agent/analysis/step_finder.cc), so that
// both number the same steps.  Plain C++: the shim links nothing else.
//
// The hook names each optimizer's ranges by the order in which the
// optimizers first stepped: "optimizer.step" (the first), then
// "optimizer.step#2", "optimizer.step#3", ...  A GAN steps two of them
// per iteration (the discriminator's, then the generator's), a
// seq2seq model its encoder's and decoder's, an actor-critic loop its
// actor's and critic's: every return ending a step would halve the steps.
//
// The rule, online, one optimizer step's return at a time:
//   - the first optimizer to step is the boundary, provisionally, and each
//     of its returns ends a step while nothing else steps;
//   - when it returns after another optimizer stepped, the one that stepped
//     last is the boundary from then on (the cycle D, G, D: G closes the
//     iteration; D x5, G, D: a WGAN critic's five updates and the
//     generator's are one iteration), and the step under way began at that
//     one's return;
//   - an optimizer other than the boundary that returns more than 4 times as
//     often between two boundary returns as it ever did (at least twice:
//     one never seen before) becomes the boundary at that return: a new
//     optimizer that replaced the old one while it still lives.
// Every return of the boundary optimizer ends a step and begins the next.
// With one optimizer this is every return.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuos_capture {

inline constexpr std::string_view kOptimizerStepRangeName = "optimizer.step";

// The optimizer's number in "optimizer.step" (1) or "optimizer.step#N"
// (N >= 2) from `base` (the range name the steps are read from); 0 when the
// name is neither.
uint32_t OptimizerNumber(std::string_view name, std::string_view base = kOptimizerStepRangeName);

class OptimizerStepCycle {
 public:
  struct Outcome {
    bool ends_step = false;  // this return is a boundary: it ends a step and begins the next
    // The boundary moved back to an earlier return (the learning case
    // above): the step under way began at that return's index, not at the
    // provisional one.  -1: no such move.
    int64_t began_at = -1;
  };

  // The next optimizer step's return (in time order), by OptimizerNumber.
  Outcome Add(uint32_t optimizer);

  uint32_t boundary() const { return boundary_; }
  uint32_t optimizers_seen() const { return static_cast<uint32_t>(seen_.size()); }

 private:
  struct Returns {
    uint32_t optimizer;
    uint32_t since_boundary;  // returns since the boundary's last one
    uint32_t most;            // the most it made between two boundary returns
  };
  Returns& Of(uint32_t optimizer);
  void BoundaryReturned();

  uint32_t boundary_ = 0;
  uint32_t first_ = 0;
  uint32_t first_returns_ = 0;  // while learning
  bool learning_ = true;
  uint32_t previous_ = 0;
  int64_t previous_index_ = -1;
  int64_t index_ = -1;
  std::vector<uint32_t> seen_;     // every optimizer number met (up to kMaxOptimizers)
  std::vector<Returns> returns_;   // likewise
  static constexpr size_t kMaxOptimizers = 64;
};

}  // namespace gpuos_capture
