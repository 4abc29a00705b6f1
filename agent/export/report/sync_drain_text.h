// The GPU idle that followed the driving thread's syncs (and its allocation
// calls, which wait the same way), as the text and
// HTML reports say it under "why the GPU was idle", e.g. "after the driving
// thread's syncs (it waited for the GPU's queue to run dry): 1.234 ms
// (2.0% of step time) in 12,736 stretches; 32.0 syncs per step fell between
// its launches".
#pragma once

#include <string>

#include "analysis/step_analysis.h"

namespace gpuos {

// "" when no idle stretch began inside a sync.
std::string SyncDrainText(const StepAnalysis& a);

// The same for the thread's allocation calls (a cudaFree waits for the
// device), e.g. "in and after the driving thread's allocation calls
// (cudaMalloc, cudaFree; a free waits for the GPU's queue to run dry):
// 11.2 ms (32.8% of step time); 37.0 calls per step"; "" when none.
std::string AllocationDrainText(const StepAnalysis& a);

}  // namespace gpuos
