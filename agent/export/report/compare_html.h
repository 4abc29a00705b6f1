// `gpuos-trace compare ... --html OUT.html`: a comparison of runs as one
// self-contained web page (inline CSS, no script, nothing fetched): a
// stacked bar per run of its mean step by stage, side by side on one
// scale, the comparison table, what changed the step, the knee and each
// run's diagnosis.  It renders report/compare_report.h's rows; it analyzes nothing.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "analysis/run_comparison.h"

namespace gpuos {

void WriteCompareHtml(const Comparison& comparison, std::ostream& out);
absl::Status WriteCompareHtmlFile(const std::string& path, const Comparison& comparison);

}  // namespace gpuos
