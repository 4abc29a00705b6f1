// `gpuos-trace compare`: each trace through the report's analysis
// (SummarizeTrace, AnalyzeSteps, Diagnose), reduced, compared and printed
// (analysis/run_comparison.h, export/report/compare_report.h, compare_html.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/run_comparison.h"
#include "cli/scenario_options.h"

namespace gpuos {

// One run to compare: a trace, or a run that has none (`failed` set).
struct CompareInput {
  std::string name;
  std::string path;
  std::optional<uint64_t> batch_size;
  std::string failed;
  std::vector<std::string> argv;  // for a failed run: what was run
};

// A trace that cannot be read becomes a failed run saying why.
Comparison CompareRuns(const std::vector<CompareInput>& inputs, const StepOptions& steps,
                       std::optional<double> knee_threshold);

// Prints (and writes the page); the exit status: 0, or 1 when a trace could
// not be read or the page not written.
int PrintComparison(const Comparison& comparison, bool json, const std::string& html_path);

int RunCompare(const CompareCommand& command);

}  // namespace gpuos
