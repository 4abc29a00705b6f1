// Which optimizer steps end a training step; see optimizer_step_cycle.h.
#include "optimizer_step_cycle.h"

#include <algorithm>

namespace gpuos_capture {

uint32_t OptimizerNumber(std::string_view name, std::string_view base) {
  if (name.substr(0, base.size()) != base) return 0;
  std::string_view rest = name.substr(base.size());
  if (rest.empty()) return 1;
  if (rest.front() != '#' || rest.size() < 2 || rest.size() > 10 || rest[1] == '0') return 0;
  uint64_t n = 0;
  for (char ch : rest.substr(1)) {
    if (ch < '0' || ch > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(ch - '0');
  }
  return n >= 2 && n <= UINT32_MAX ? static_cast<uint32_t>(n) : 0;
}

OptimizerStepCycle::Returns& OptimizerStepCycle::Of(uint32_t optimizer) {
  for (Returns& r : returns_) {
    if (r.optimizer == optimizer) return r;
  }
  if (returns_.size() == kMaxOptimizers) returns_.erase(returns_.begin());  // a bound, not a case
  return returns_.emplace_back(Returns{optimizer, 0});
}

void OptimizerStepCycle::BoundaryReturned() {
  for (Returns& r : returns_) r.since_boundary = 0;
  returns_since_boundary_ = 0;
}

OptimizerStepCycle::Outcome OptimizerStepCycle::Add(uint32_t optimizer) {
  ++index_;
  Outcome out;
  if (std::find(seen_.begin(), seen_.end(), optimizer) == seen_.end() && seen_.size() < kMaxOptimizers) {
    seen_.push_back(optimizer);
  }
  ++returns_since_boundary_;
  if (boundary_ == 0) {
    boundary_ = first_ = optimizer;
    first_returns_ = 1;
    out.ends_step = true;
  } else if (learning_ && optimizer == first_) {
    // Provisionally a boundary; the optimizer that stepped before it may
    // close the cycle.
    if (previous_ != first_ && candidate_ == 0) {
      candidate_ = previous_;
      candidate_index_ = previous_index_;
    }
    ++first_returns_;
    out.ends_step = true;
  } else if (learning_ && optimizer == candidate_) {
    // D, G, D, ..., G: G closes the cycle that began at its first return.
    boundary_ = optimizer;
    learning_ = false;
    out.began_at = candidate_index_;
    out.ends_step = true;
    longest_cycle_ = std::max<uint64_t>(static_cast<uint64_t>(index_ - candidate_index_), first_returns_ + 1);
  } else if (optimizer == boundary_) {
    longest_cycle_ = std::max(longest_cycle_, returns_since_boundary_);
    out.ends_step = true;
  } else {
    Returns& r = Of(optimizer);
    ++r.since_boundary;
    const bool takes_over = learning_ ? r.since_boundary >= 2
                                      : r.since_boundary >= 2 && returns_since_boundary_ > 4 * longest_cycle_;
    if (takes_over) {
      boundary_ = optimizer;
      learning_ = false;
      out.ends_step = true;
      out.earlier_boundaries = static_cast<uint32_t>(r.since_boundary - 1);
    }
  }
  if (out.ends_step) BoundaryReturned();
  previous_ = optimizer;
  previous_index_ = index_;
  return out;
}

}  // namespace gpuos_capture
