// The per-rank part of `gpuos-trace report`: one row per rank of a
// distributed job (rank_analysis.h) and the straggler, as text and JSON.
#pragma once

#include <ostream>

#include "analysis/rank_analysis.h"
#include "export/report/json_writer.h"

namespace gpuos {

// Nothing when the trace has no ranks.  `report_pid`: the process the
// step report above it analyzed, marked in the table.
void WriteRankTextReport(const RankAnalysis& ranks, std::ostream& out, uint32_t report_pid = 0);

// The keys "ranks" (an array, empty without ranks) and "straggler" (null
// when none).  Per-step quantities are means over the rank's measured
// steps; each rank's "step_comm" lists every step's.
void WriteRankJsonMembers(const RankAnalysis& ranks, JsonWriter& json);

}  // namespace gpuos
