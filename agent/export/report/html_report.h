// `gpuos-trace report FILE --html OUT.html`: the report as one self-contained
// web page (inline CSS, inline SVG charts, a few lines of inline script for
// sortable tables; nothing fetched from the network), for people who would
// rather look at a run than read it.  It renders the same summaries as the
// text report (TraceSummary, StepAnalysis, Diagnosis); it analyzes nothing.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "analysis/diagnosis.h"
#include "analysis/rank_analysis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"

namespace gpuos {

struct HtmlReportOptions {
  // Steps drawn as bars and listed in the step table; the page says how many
  // more there were (the JSON report lists every step).  Keeps the page a few
  // MB even for runs of many thousands of steps.
  size_t max_step_bars = 2000;
  size_t max_step_rows = 500;
  // Rows of the ranked tables (kernels, API calls, NVTX, syscalls).
  size_t max_table_rows = 50;
  // Thread rows per process; the rest are summed into one row.
  size_t max_thread_rows = 64;
};

// Writes the page: header (command, host, duration, events, drops), the
// diagnosis, per-step stacked bars (CPU side and GPU side), stages, GPU idle
// attribution, OS costs by role, then the CUDA/NVTX and OS tables.  Sections
// with no data say what is missing and why it might be.  Every string from
// the trace is HTML-escaped.  `ranks`, when given, adds the table of ranks
// (or of training processes) after the steps.
void WriteHtmlReport(const TraceSummary& summary, const StepAnalysis& steps, const Diagnosis& diagnosis,
                     std::ostream& out, const HtmlReportOptions& options = HtmlReportOptions(),
                     const RankAnalysis* ranks = nullptr);

// The same into the file `path` (created or truncated).
absl::Status WriteHtmlReportFile(const std::string& path, const TraceSummary& summary, const StepAnalysis& steps,
                                 const Diagnosis& diagnosis, const HtmlReportOptions& options = HtmlReportOptions(),
                                 const RankAnalysis* ranks = nullptr);

}  // namespace gpuos
