// Cutting steps in two where extra work ends and an iteration begins: the
// one way every rule that splits a step does it.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/step_finder.h"

namespace gpuos {

// Each step k with cut_at[k] != 0 becomes two: the extra work before the
// cut, left out as before (its reason + `suffix`), and the iteration from
// it, measured.  Steps are numbered again in order.
void SplitStepsAt(std::vector<StepWindow>& steps, const std::vector<uint64_t>& cut_at, const char* suffix);

}  // namespace gpuos
