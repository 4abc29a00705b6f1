// CPU collectives of a trace's ranks for the merge; see cpu_collectives.h.
#include "analysis/cpu_collectives.h"

#include <utility>

namespace gpuos {

std::vector<StepCollectiveEnds> CpuCollectiveEndsOf(const RankAnalysis& analysis) {
  std::vector<StepCollectiveEnds> best;
  size_t best_count = 0;
  for (const RankSummary& rank : analysis.ranks) {
    std::vector<StepCollectiveEnds> steps;
    size_t count = 0;
    for (size_t i = 0; i < rank.steps.steps.size() && i < rank.comm.steps.size(); ++i) {
      const std::vector<uint64_t>& ends = rank.comm.steps[i].collective_ends_ns;
      if (ends.empty()) continue;
      steps.push_back({rank.steps.steps[i].index, ends});
      count += ends.size();
    }
    if (count > best_count) best_count = count, best = std::move(steps);
  }
  return best;
}

absl::StatusOr<std::vector<StepCollectiveEnds>> CpuCollectiveEnds(const std::string& path) {
  absl::StatusOr<RankAnalysis> analysis = AnalyzeRanks(path, StepOptions());
  if (!analysis.ok()) return analysis.status();
  return CpuCollectiveEndsOf(*analysis);
}

}  // namespace gpuos
