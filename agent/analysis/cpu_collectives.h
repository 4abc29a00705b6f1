// The CPU collectives (gloo) of a trace, as `gpuos-trace merge` aligns
// hosts' clocks by them: per step of one rank, the ends of its comm
// threads' waits for peers' data (communication.h, (b)).  The same
// collective ends at about the same instant on every rank (when the data
// arrives), which is what RefineSkewFromStepCollectives pairs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/rank_analysis.h"
#include "stream/clock_alignment.h"

namespace gpuos {

// The rank with the most such ends (the ranks of one trace share its
// clock, so one is enough); empty when the trace has no ranks or none
// waited for peers.  Each step of the rank's own step analysis (warm-up
// included) that has ends, with its index.
std::vector<StepCollectiveEnds> CpuCollectiveEndsOf(const RankAnalysis& analysis);

// The same from a trace file (the rank analysis with default step options).
absl::StatusOr<std::vector<StepCollectiveEnds>> CpuCollectiveEnds(const std::string& path);

}  // namespace gpuos
