// `gpuos-trace sweep`: records the command once per setting, in turn, each
// by running this same gpuos-trace binary (/proc/self/exe) as a launched
// recording, so a sweep run is exactly `gpuos-trace [record options] -o
// DIR/NN-NAME.gpuos -- COMMAND`; its output (the job's and the tracer's)
// goes to DIR/NN-NAME.log.  A run that fails is reported in its column and
// the sweep goes on; SIGTERM/SIGHUP stop it after the current run (passed
// on to that run), as does Ctrl-C (which the run's tracer gets from the
// terminal itself).  Then the runs are compared (compare_command.h) with
// the knee named.
#pragma once

#include <string>

#include "cli/scenario_options.h"

namespace gpuos {

// The file name of run `index` (0-based) of a sweep: "03-workers=4.gpuos",
// characters outside [A-Za-z0-9._=,+-] made '_'.
std::string SweepRunFileName(size_t index, const std::string& run_name, const std::string& extension);

// Exit status: 0 when every run succeeded, 1 when one failed or the
// comparison could not be written, 2 when DIR cannot be created, 130
// after an interruption.
int RunSweep(const SweepCommand& command);

}  // namespace gpuos
