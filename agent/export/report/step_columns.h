// The columns of the per-step table, shared by the text report
// (report/step_report.h) and the web page (report/html_report.h) so both show the same
// parts of a step under the same names.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/step_breakdown.h"

namespace gpuos {

// One column: a title and how to read it from a step.
struct StepColumn {
  const char* title;
  std::function<double(const StepRecord&)> value;
  bool is_ms;  // else a count
};

// step ms, the CPU-side partition, off-CPU, GPU kernel/copy/idle, kernels,
// involuntary switches, munmap calls.
const std::vector<StepColumn>& StepColumns();

// A value as shown in a column: ms with 3 decimals, counts whole, or with
// one decimal for a statistic (mean, p50, p95) over steps.
std::string StepCell(const StepColumn& column, double value, bool statistic);

}  // namespace gpuos
