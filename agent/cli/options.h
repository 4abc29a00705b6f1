// Command-line parsing for gpuos-trace: which subcommand, with which
// options.  Pure logic (no side effects), so every rule is unit-tested.
//
//   gpuos-trace [record options] [--] cmd args...
//   gpuos-trace record [record options] [--] cmd args...
//   gpuos-trace report FILE [--format text|json] [--step-regex RE] [--data-range-regex RE]
//                           [--warmup-steps N] [--html OUT.html]
//   gpuos-trace dump FILE
//   gpuos-trace export FILE -o OUT.pftrace [--format json]
//   gpuos-trace ctl --pid PID dump
//   gpuos-trace ctl --pid PID capture N
//   gpuos-trace compare A.gpuos B.gpuos ... / gpuos-trace sweep --set ... -- cmd  (scenario_options.h)
//   gpuos-trace merge A.gpuos B.gpuos... -o JOB.gpuos
//   gpuos-trace --help | --version
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/step_options.h"
#include "cli/scenario_options.h"
#include "record/record_options.h"

namespace gpuos {

enum class ReportFormat { kText, kJson };

struct ReportCommand {
  std::string path;
  ReportFormat format = ReportFormat::kText;
  StepOptions steps;
  std::string html_path;  // also write the report as a web page (export/report/html_report.h)
};

struct ExportCommand {
  std::string path;
  std::string output;  // .pftrace
  bool chrome_json = false;  // also write <output minus .pftrace>.json
  StepOptions steps;
};

// `gpuos-trace ctl --pid PID dump` and `... capture N`.
struct CtlCommand {
  int pid = 0;
  std::string action;          // "dump" or "capture"
  uint32_t capture_steps = 0;  // capture: N
};

// `gpuos-trace merge A.gpuos B.gpuos... -o JOB.gpuos` (stream/trace_merge.h).
struct MergeCommand {
  std::vector<std::string> inputs;
  std::string output;
};

struct ParsedCommandLine {
  enum class Kind { kRecord, kReport, kDump, kExport, kCtl, kCompare, kSweep, kMerge, kHelp, kVersion } kind = Kind::kHelp;
  RecordOptions record;
  ReportCommand report;
  ExportCommand export_;
  CtlCommand ctl;
  CompareCommand compare;
  SweepCommand sweep;
  MergeCommand merge;
};

// `now_suffix` names the default output ("gpuos-trace-<now_suffix>.gpuos").
absl::StatusOr<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                                   const std::string& now_suffix);

// "kernel,memcpy" -> the same list, checked: each of kernel, memcpy, memset,
// sync, runtime, driver at most once, and kernel or memcpy among them (the
// shim records nothing without one of the two).
absl::StatusOr<std::string> ParseCudaRecordKinds(const std::string& text);
// "64M", "1G", "4096" -> bytes.
absl::StatusOr<uint64_t> ParseByteSize(const std::string& text);
// "slow-step=3x" (--flight-trigger) -> 3.
absl::StatusOr<double> ParseSlowStepTrigger(const std::string& text);
// "30s", "1ms", "250us", "100ns", "2m" -> nanoseconds.
absl::StatusOr<uint64_t> ParseDuration(const std::string& text);

extern const char kUsage[];

}  // namespace gpuos
