// Renders the step analysis and its diagnosis: text tables for the terminal
// report, and the "step_analysis", "steps", "stage_summary",
// "gpu_idle_attribution" and "diagnosis" members of the JSON report.
#pragma once

#include <cstddef>
#include <ostream>

#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "export/report/json_writer.h"

namespace gpuos {

// The step table (the first `max_steps` steps, then mean/p50/p95 rows over
// the measured steps), the stage shares, the GPU-idle attribution, OS costs
// by role and the diagnosis.  Without steps: one paragraph saying why.
void WriteStepTextReport(const StepAnalysis& analysis, const Diagnosis& diagnosis, std::ostream& out,
                         size_t max_steps = 10);

// Writes the keys "step_analysis", "steps", "stage_summary",
// "gpu_idle_attribution" and "diagnosis" into the JSON object being written.
// Times are ns, shares are percent of step time.  Without steps, "steps" is
// [] and "stage_summary" and "gpu_idle_attribution" are null.
void WriteStepJsonMembers(const StepAnalysis& analysis, const Diagnosis& diagnosis, JsonWriter& json);

// "attach_coverage": how much of an attach window the steps hold
// (StepAnalysis::Coverage), null in a launched trace.
void AttachCoverageJson(const StepAnalysis& analysis, JsonWriter& json);

// "key": {mean, p50, p95, min, max} of a distribution over steps, each
// times `scale`.
void StatsJson(const char* key, const DistributionStats& d, JsonWriter& json, double scale = 1.0);

}  // namespace gpuos
