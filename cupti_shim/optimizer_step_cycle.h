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
//   - the first optimizer to step, F, is the boundary provisionally: each of
//     its returns ends a step while the cycle is not known;
//   - when F returns after another optimizer X stepped, X may close the
//     cycle (D, G, D: G does); when X returns again, it does: X is the
//     boundary from then on, step 1 ran from X's first return to this one,
//     and this return ends it (D x5, G, D x5, G: a WGAN critic's five
//     updates and the generator's are one iteration, whether the generator
//     also steps after the first batch or not);
//   - while learning, an optimizer Y other than F that returns twice with no
//     F return between takes over at its second return (a new optimizer
//     that replaced F; a loop updating Y twice per update of F);
//   - once known, an optimizer other than the boundary takes over at a
//     return (its second at least) when the boundary has not returned for
//     more than 4 times the longest cycle seen (a new optimizer that
//     replaced the old one while it still lives);
//   - an optimizer that steps once and never again changes nothing;
//   - where an optimizer takes over, its returns since the old boundary's
//     last return end steps too (`earlier_boundaries`): the report counts
//     them where they were, the shim's live count at the takeover.
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
    // The cycle was learned at this return: the provisional boundaries
    // before it are void, and step 1 began at the return of index
    // `began_at` (counting from 0), ending at this one (ends_step is set).
    // -1: no such change.
    int64_t began_at = -1;
    // An optimizer took over at this return (ends_step is set): its last
    // `earlier_boundaries` returns before this one, all after the old
    // boundary's last return, end steps too.
    uint32_t earlier_boundaries = 0;
  };

  // The next optimizer step's return (in time order), by OptimizerNumber.
  Outcome Add(uint32_t optimizer);

  uint32_t boundary() const { return boundary_; }
  uint32_t optimizers_seen() const { return static_cast<uint32_t>(seen_.size()); }

 private:
  struct Returns {
    uint32_t optimizer;
    uint32_t since_boundary;  // its returns since the boundary's last one
  };
  Returns& Of(uint32_t optimizer);
  void BoundaryReturned();

  uint32_t boundary_ = 0;
  uint32_t first_ = 0;
  uint32_t first_returns_ = 0;  // while learning
  bool learning_ = true;
  uint32_t candidate_ = 0;          // while learning: the optimizer before F's return after it
  int64_t candidate_index_ = -1;    // that optimizer's return
  uint32_t previous_ = 0;
  int64_t previous_index_ = -1;
  int64_t index_ = -1;
  uint64_t returns_since_boundary_ = 0;  // of any optimizer
  uint64_t longest_cycle_ = 1;           // returns from one boundary return to the next
  std::vector<uint32_t> seen_;     // every optimizer number met (up to kMaxOptimizers)
  std::vector<Returns> returns_;   // likewise
  static constexpr size_t kMaxOptimizers = 64;
};

}  // namespace gpuos_capture
