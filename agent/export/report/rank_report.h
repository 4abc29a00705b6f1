// The per-rank part of `gpuos-trace report`: one row per rank of a
// distributed job (rank_analysis.h) and the straggler, as text and JSON.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/rank_analysis.h"
#include "export/report/json_writer.h"
#include "export/report/text_table.h"

namespace gpuos {

// The table of ranks or, in a trace that names none, of the training
// processes, as the text and HTML reports both show it.
struct UnitTableView {
  std::string heading;  // "Ranks", "Training processes"
  std::string legend;   // how many, and what the columns mean
  std::vector<TextTable::Column> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // the straggler, notes, units without steps
};

// Nothing when the trace has neither.  `report_pid`: the process the step
// report analyzed, marked with a * in the table.
std::optional<UnitTableView> RankTableView(const RankAnalysis& ranks, uint32_t report_pid);

// Nothing when the trace has no ranks.  `report_pid`: the process the
// step report above it analyzed, marked in the table.
void WriteRankTextReport(const RankAnalysis& ranks, std::ostream& out, uint32_t report_pid = 0);

// The keys "ranks" (an array, empty without ranks) and "straggler" (null
// when none).  Per-step quantities are means over the rank's measured
// steps; each rank's "step_comm" lists every step's.
void WriteRankJsonMembers(const RankAnalysis& ranks, JsonWriter& json);

}  // namespace gpuos
