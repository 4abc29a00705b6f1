// The report page's table of ranks or, in a trace that names none, of the
// training processes: the text report's table (rank_report.h) as HTML.
// Part of the page html_report.h writes.
#pragma once

#include <cstdint>
#include <ostream>

#include "analysis/rank_analysis.h"

namespace gpuos {

// Nothing when the trace has neither ranks nor several training processes.
void WriteHtmlRankSection(const RankAnalysis& ranks, uint32_t report_pid, std::ostream& out);

}  // namespace gpuos
