// Renders a comparison of runs (analysis/run_comparison.h) for
// `gpuos-trace compare` and `gpuos-trace sweep`: one text table with a
// column per run and the deltas against the first run beside each number,
// the line per run naming the stage that explains its change, the knee;
// or the same as one JSON object.  report/compare_html.h draws it as a web page.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/run_comparison.h"

namespace gpuos {

// The rows of the table: a title, then one cell per run (not yet made
// printable: TextTable and the HTML page each escape their way).
struct CompareRow {
  bool rule = false;  // a separator between groups of rows
  std::vector<std::string> cells;
};
std::vector<CompareRow> CompareTableRows(const Comparison& comparison);

inline constexpr char kWholeTraceNote[] =
    "* whole trace (start-up included), divided by the steps found; the rest: per measured step";

void WriteCompareText(const Comparison& comparison, std::ostream& out);

// {"runs": [...], "deltas": [...], "knee": {...} | null}.  Times in ns,
// shares in percent of the measured steps' wall time.
void WriteCompareJson(const Comparison& comparison, std::ostream& out);

// The traced command of a run, quoted like the report quotes it.
std::string RunCommandText(const RunFacts& run);

}  // namespace gpuos
