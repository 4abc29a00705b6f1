// gpuos-trace: entry point.  Parses the command line and hands over to
// recording (record/recording_session.h) or reporting (export/report/os_report.h).
#include <time.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/cpu_collectives.h"
#include "analysis/diagnosis.h"
#include "analysis/rank_analysis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "cli/options.h"
#include "export/report/cuda_report.h"
#include "export/event_dump.h"
#include "export/report/html_report.h"
#include "export/report/os_report.h"
#include "export/perfetto/perfetto_export.h"
#include "export/report/rank_report.h"
#include "export/report/step_report.h"
#include "record/launched_job.h"
#include "record/prepare.h"
#include "record/recording_session.h"
#include "record/running_job.h"
#include "cli/compare_command.h"
#include "cli/ctl_command.h"
#include "cli/sweep_command.h"
#include "stream/trace_completeness.h"
#include "stream/trace_merge.h"
#include "stream/trace_reader.h"

namespace {

std::string NowSuffix() {
  time_t now = time(nullptr);
  struct tm local {};
  localtime_r(&now, &local);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &local);
  return buf;
}

int RunReport(const gpuos::ReportCommand& report) {
  auto summary = gpuos::SummarizeTrace(report.path);
  if (!summary.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  auto steps = gpuos::AnalyzeSteps(report.path, report.steps);
  if (!steps.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(steps.status().message()).c_str());
    return 2;
  }
  auto ranks = gpuos::AnalyzeRanks(report.path, report.steps);
  if (!ranks.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(ranks.status().message()).c_str());
    return 2;
  }
  gpuos::Diagnosis diagnosis = gpuos::Diagnose(*steps, ranks->straggler ? &*ranks->straggler : nullptr);
  if (!report.html_path.empty()) {
    absl::Status written = gpuos::WriteHtmlReportFile(report.html_path, *summary, *steps, diagnosis,
                                                           gpuos::HtmlReportOptions(), &*ranks);
    if (!written.ok()) {
      fprintf(stderr, "gpuos-trace: %s\n", std::string(written.message()).c_str());
      return 1;
    }
    fprintf(stderr, "gpuos-trace: wrote %s; open it in a web browser\n", report.html_path.c_str());
  }
  if (report.format == gpuos::ReportFormat::kJson) {
    gpuos::WriteOsJsonReport(summary->os, std::cout, [&](gpuos::JsonWriter& json) {
      gpuos::WriteCudaJsonMembers(summary->cuda, json);
      gpuos::WriteStepJsonMembers(*steps, diagnosis, json);
      gpuos::WriteRankJsonMembers(*ranks, json);
    });
  } else {
    // What users ask first (where did the step go, why is the GPU idle)
    // comes after the run's identity and before the detailed tables.
    gpuos::WriteOsTextReport(summary->os, std::cout);
    gpuos::WriteCudaTextReport(summary->cuda, std::cout);
    gpuos::WriteStepTextReport(*steps, diagnosis, std::cout);
    gpuos::WriteRankTextReport(*ranks, std::cout, steps->pid);
  }
  std::cout.flush();
  if (!summary->os.read_error.empty()) {
    // The readable part was reported; say loudly that the file is damaged.
    fprintf(stderr, "gpuos-trace: %s: %s\n", report.path.c_str(), summary->os.read_error.c_str());
    return 3;
  }
  return 0;
}

// Export and dump read on to the end of a file they cannot vouch for: the
// warning comes first, before anything else they print.
void WarnIfIncomplete(const std::string& path) {
  if (auto reader = gpuos::TraceReader::Open(path); reader.ok()) {
    const std::string window = gpuos::FlightWindowNote((*reader)->header());
    if (!window.empty()) fprintf(stderr, "gpuos-trace: NOTE: %s is a %s\n", path.c_str(), window.c_str());
  }
  auto reason = gpuos::IncompleteReasonOfFile(path);
  if (reason.ok() && !reason->empty()) {
    fprintf(stderr, "gpuos-trace: WARNING: %s is incomplete: %s\n", path.c_str(), reason->c_str());
  }
}

int RunExport(const gpuos::ExportCommand& command) {
  WarnIfIncomplete(command.path);
  gpuos::ExportOptions options;
  if (command.chrome_json) {
    std::string base = command.output;
    if (base.size() > 8 && base.compare(base.size() - 8, 8, ".pftrace") == 0) base.resize(base.size() - 8);
    options.chrome_json_path = base + ".json";
  }
  // Steps go on their own track; a trace without steps exports without one.
  auto steps = gpuos::AnalyzeSteps(command.path, command.steps);
  if (steps.ok()) {
    for (const gpuos::StepRecord& step : steps->steps) {
      options.steps.push_back({step.start_ns, step.end_ns, static_cast<int64_t>(step.index), steps->pid});
    }
  }
  absl::Status status = gpuos::ExportPerfetto(command.path, command.output, options);
  if (!status.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
    return status.code() == absl::StatusCode::kDataLoss ? 3 : 1;
  }
  fprintf(stderr, "gpuos-trace: wrote %s%s%s; open it in ui.perfetto.dev\n", command.output.c_str(),
          options.chrome_json_path.empty() ? "" : " and ", options.chrome_json_path.c_str());
  return 0;
}

// Input errors (a missing or foreign file, too few traces) exit 2, like
// command-line errors; a failure writing the output exits 1.
int RunMerge(const gpuos::MergeCommand& command) {
  gpuos::MergeOptions options;
  options.cpu_collectives = gpuos::CpuCollectiveEnds;
  auto merged = gpuos::MergeTraces(command.inputs, command.output, options);
  if (!merged.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(merged.status().message()).c_str());
    return merged.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const std::string& warning : merged->warnings) {
    fprintf(stderr, "gpuos-trace: WARNING: %s\n", warning.c_str());
  }
  for (const gpuos::v1::MergedHost& host : merged->hosts) {
    fprintf(stderr, "gpuos-trace: %s (%s): skew %+.6f ms +/- %.6f ms (%s)\n", host.hostname().c_str(),
            host.source().c_str(), host.skew_ns() / 1e6, host.skew_bound_ns() / 1e6, host.skew_basis().c_str());
  }
  fprintf(stderr, "gpuos-trace: wrote %s (%llu events)\n", command.output.c_str(),
          static_cast<unsigned long long>(merged->events));
  return 0;
}

// --prepare execs the command; otherwise one recording session, of a
// command it launches or of processes that already run.
int RunRecordCommand(const gpuos::RecordOptions& options) {
  if (options.prepare) return gpuos::RunPrepared(options);
  if (options.attaching()) {
    gpuos::RunningJob job(options);
    return gpuos::RunRecordingSession(options, job);
  }
  gpuos::LaunchedJob job(options);
  return gpuos::RunRecordingSession(options, job);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto parsed = gpuos::ParseCommandLine(args, NowSuffix());
  if (!parsed.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  switch (parsed->kind) {
    case gpuos::ParsedCommandLine::Kind::kHelp:
      fputs(gpuos::kUsage, stdout);
      return 0;
    case gpuos::ParsedCommandLine::Kind::kVersion:
      printf("gpuos-trace %s\n", GPUOS_VERSION);
      return 0;
    case gpuos::ParsedCommandLine::Kind::kReport:
      return RunReport(parsed->report);
    case gpuos::ParsedCommandLine::Kind::kDump: {
      WarnIfIncomplete(parsed->report.path);
      absl::Status status = gpuos::DumpTraceAsJsonLines(parsed->report.path, std::cout);
      std::cout.flush();
      if (!status.ok()) {
        fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
        return 3;
      }
      return 0;
    }
    case gpuos::ParsedCommandLine::Kind::kExport:
      return RunExport(parsed->export_);
    case gpuos::ParsedCommandLine::Kind::kCtl:
      return gpuos::RunCtl(parsed->ctl);
    case gpuos::ParsedCommandLine::Kind::kCompare:
      return gpuos::RunCompare(parsed->compare);
    case gpuos::ParsedCommandLine::Kind::kSweep:
      return gpuos::RunSweep(parsed->sweep);
    case gpuos::ParsedCommandLine::Kind::kMerge:
      return RunMerge(parsed->merge);
    case gpuos::ParsedCommandLine::Kind::kRecord:
      return RunRecordCommand(parsed->record);
  }
  return 2;
}
