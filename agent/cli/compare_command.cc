// `gpuos-trace compare`; see compare_command.h.
#include "cli/compare_command.h"

#include <cstdio>
#include <iostream>

#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "export/report/compare_html.h"
#include "export/report/compare_report.h"

namespace gpuos {

Comparison CompareRuns(const std::vector<CompareInput>& inputs, const StepOptions& steps,
                       std::optional<double> knee_threshold) {
  Comparison comparison;
  for (const CompareInput& in : inputs) {
    RunFacts failed;
    failed.name = in.name;
    failed.path = in.path;
    failed.argv = in.argv;
    if (!in.failed.empty()) {
      failed.failed = in.failed;
      comparison.runs.push_back(failed);
      continue;
    }
    auto summary = SummarizeTrace(in.path);
    if (!summary.ok()) {
      failed.failed = "unreadable: " + std::string(summary.status().message());
      comparison.runs.push_back(failed);
      continue;
    }
    auto analysis = AnalyzeSteps(in.path, steps);
    if (!analysis.ok()) {
      failed.failed = "not analyzed: " + std::string(analysis.status().message());
      comparison.runs.push_back(failed);
      continue;
    }
    comparison.runs.push_back(ReduceRun(in.name, in.path, *summary, *analysis, Diagnose(*analysis), in.batch_size));
  }
  comparison.deltas = DeltasAgainstFirst(comparison.runs);
  if (knee_threshold) comparison.knee = FindKnee(comparison.runs, *knee_threshold);
  return comparison;
}

int PrintComparison(const Comparison& comparison, bool json, const std::string& html_path) {
  int status = 0;
  for (const RunFacts& run : comparison.runs) {
    if (run.failed.rfind("unreadable: ", 0) == 0 || run.failed.rfind("not analyzed: ", 0) == 0) {
      fprintf(stderr, "gpuos-trace: %s: %s\n", run.path.c_str(), run.failed.c_str());
      status = 1;
    }
  }
  if (!html_path.empty()) {
    absl::Status written = WriteCompareHtmlFile(html_path, comparison);
    if (!written.ok()) {
      fprintf(stderr, "gpuos-trace: %s\n", std::string(written.message()).c_str());
      status = 1;
    } else {
      fprintf(stderr, "gpuos-trace: wrote %s; open it in a web browser\n", html_path.c_str());
    }
  }
  if (json) {
    WriteCompareJson(comparison, std::cout);
  } else {
    WriteCompareText(comparison, std::cout);
  }
  std::cout.flush();
  return status;
}

int RunCompare(const CompareCommand& command) {
  std::vector<CompareInput> inputs;
  for (size_t i = 0; i < command.paths.size(); ++i) {
    CompareInput in;
    in.name = command.names[i];
    in.path = command.paths[i];
    if (command.batch_sizes.size() == 1) in.batch_size = command.batch_sizes[0];
    if (command.batch_sizes.size() > 1) in.batch_size = command.batch_sizes[i];
    inputs.push_back(in);
  }
  return PrintComparison(CompareRuns(inputs, command.steps, command.knee_threshold), command.json, command.html_path);
}

}  // namespace gpuos
