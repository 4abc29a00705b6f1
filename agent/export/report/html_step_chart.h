// The report page's step charts: one stacked SVG bar per step, its parts the
// step's time by what the launching thread (CPU chart) or the GPU was doing,
// with a legend.  SVG written here, not drawn by script, so the page reads
// the same with scripts off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <vector>

#include "analysis/step_analysis.h"

namespace gpuos::html {

// One coloured part of a step's stacked bar.
struct BarPart {
  const char* label;
  const char* css;  // a colour class of assets/report.css (k-*)
  std::function<uint64_t(const StepRecord&)> ns;
};

// The launching thread's time per step, and the GPU's.
std::vector<BarPart> CpuParts();
std::vector<BarPart> GpuParts();

// The parts' colour swatches and names; `with_warmup` also explains the
// faded warmup bars.
void WriteLegend(const std::vector<BarPart>& parts, bool with_warmup, std::ostream& out);

// One stacked bar per step (the first `shown`), heights in ms of wall time;
// the parts add up to the step's duration.  The scale follows the measured
// steps, so one slow warmup step cannot flatten the rest: steps taller than
// the chart are cut off and marked.  `kind` is "cpu" or "gpu".  Returns how
// many bars were cut off.
size_t WriteStepChart(const StepAnalysis& a, const char* kind, const std::vector<BarPart>& parts, size_t shown,
                      std::ostream& out);

}  // namespace gpuos::html
