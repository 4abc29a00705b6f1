// The columns of the per-step table, shared by the text report
// (report/step_report.h) and the web page (report/html_report.h) so both show the same
// parts of a step under the same names.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/step_analysis.h"
#include "analysis/step_breakdown.h"

namespace gpuos {

// One column: a title and how to read it from a step.
struct StepColumn {
  const char* title;
  std::function<double(const StepRecord&)> value;
  bool is_ms;  // else a count
  // Read from CUPTI's records (GPU activity, CUDA API calls), which a trace
  // with capture windows has only for the steps with CUDA detail.
  bool needs_detail = false;
};

// step ms, the CPU-side partition, off-CPU, GPU kernel/copy/idle, kernels,
// involuntary switches, munmap calls.
const std::vector<StepColumn>& StepColumns();

// A value as shown in a column: ms with 3 decimals, counts whole, or with
// one decimal for a statistic (mean, p50, p95) over steps.
std::string StepCell(const StepColumn& column, double value, bool statistic);

// Measured steps whose GPU side the summaries use: those with CUDA detail
// (every measured step without capture windows).
size_t CudaDetailSteps(const StepAnalysis& a);

// Whether the GPU-side summaries (measured_*) cover fewer steps than the
// OS side (all_steps_*): a trace with capture windows.  Each summary then
// says over how many steps it was computed.
inline bool GpuSideOverFewerSteps(const StepAnalysis& a) {
  return a.steps_without_detail > 0 || a.window_start_steps > 0;
}

// With capture windows: how much longer the median step with CUDA detail
// (a measured one) took than the median of all steps (0 without windows,
// or with no step either way); from 10% on the reports say it.
double DetailStepsSlowdown(const StepAnalysis& a);
inline constexpr double kDetailSlowdownToSay = 0.10;

// "; the first step of N windows left out: ..." where window-start steps
// (analysis/step_breakdown.h) are out of the GPU-side summaries; else "".
std::string WindowStartsLeftOut(const StepAnalysis& a);

// Whether `column` has a value for step `s` (not when it needs CUDA detail
// the step lacks).
inline bool HasValue(const StepColumn& column, const StepRecord& s) { return !column.needs_detail || s.cuda_detail; }
// Whether step `s`'s value of `column` goes into the column's mean/p50/p95
// (a measured step's): not a window start's GPU-side values.
inline bool InColumnStats(const StepColumn& column, const StepRecord& s) {
  return HasValue(column, s) && !(column.needs_detail && s.window_start);
}

}  // namespace gpuos
