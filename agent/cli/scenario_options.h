// Command lines of the scenario subcommands (issue 22), pure logic like
// options.h:
//
//   gpuos-trace compare A.gpuos B.gpuos [...] [--names a,b,...] [--format text|json]
//               [--html OUT.html] [--batch-size N[,N...]] [--knee-threshold PCT]
//               [--warmup-steps N] [--step-regex RE]
//   gpuos-trace sweep --set NAME=V1,V2[,...] [--set ...] [-o DIR] [--format text|json]
//               [--html OUT.html] [--batch-size N] [--knee-threshold PCT]
//               [--warmup-steps N] [--step-regex RE] [record options] -- COMMAND {NAME} ...
//
// A sweep runs COMMAND once per value (several --set: per combination, the
// first --set varying slowest), with every {NAME} in its arguments and in
// the record options replaced by the value.  Everything wrong with the
// specification is found here, before anything runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/step_options.h"

namespace gpuos {

inline constexpr double kDefaultKneeThreshold = 0.05;

struct CompareCommand {
  std::vector<std::string> paths;
  std::vector<std::string> names;  // one per path; default: the file name without .gpuos
  bool json = false;
  std::string html_path;
  // Empty: from each run's command line where it says; one value: every
  // run; else one per run.
  std::vector<uint64_t> batch_sizes;
  // Set: name the knee, taking the runs in the order given.
  std::optional<double> knee_threshold;
  StepOptions steps;
};

struct SweepSetting {
  std::string name;
  std::vector<std::string> values;
};

// One run of a sweep: its name ("workers=2", "workers=2,pre=100") and the
// gpuos-trace arguments that record it, less -o.
struct SweepRun {
  std::string name;
  std::vector<std::string> record_args;  // record options, substituted
  std::vector<std::string> command;      // substituted
};

struct SweepCommand {
  std::vector<SweepSetting> settings;
  std::vector<std::string> record_args;  // as given, before substitution
  std::vector<std::string> command;
  std::string output_dir;  // default: sweep-<now_suffix>
  bool json = false;
  std::string html_path;
  std::optional<uint64_t> batch_size;
  double knee_threshold = kDefaultKneeThreshold;
  StepOptions steps;
  std::vector<SweepRun> runs;  // expanded and checked
};

// `args[i..]` are the subcommand's arguments.
absl::StatusOr<CompareCommand> ParseCompare(const std::vector<std::string>& args, size_t i);
absl::StatusOr<SweepCommand> ParseSweep(const std::vector<std::string>& args, size_t i,
                                        const std::string& now_suffix);

// "workers=0,2,4" -> {workers, [0, 2, 4]}.  Names: a letter or _, then
// letters, digits, _ or -; values: non-empty, no repeats.
absl::StatusOr<SweepSetting> ParseSweepSetting(const std::string& text);
// Every combination of the settings' values, each {NAME} replaced; an
// unknown {NAME}, or a setting that no argument uses, is an error.  Braces
// around anything that is not a name ("{'a': 1}") are left as they are.
absl::StatusOr<std::vector<SweepRun>> ExpandSweep(const std::vector<SweepSetting>& settings,
                                                  const std::vector<std::string>& record_args,
                                                  const std::vector<std::string>& command);
// "5", "5%", "2.5%" -> 0.05, 0.05, 0.025; between 0 and 100 exclusive.
absl::StatusOr<double> ParseKneeThreshold(const std::string& text);

}  // namespace gpuos
