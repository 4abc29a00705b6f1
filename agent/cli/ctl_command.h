// `gpuos-trace ctl --pid PID dump`: asks a running gpuos-trace
// --flight-recorder to write its window out now, and prints the file it
// wrote.  PID is gpuos-trace's own, or that of any process it launched (its
// ancestors are searched for the recorder).
// `gpuos-trace ctl --pid PID capture N`: asks the shim in job process PID
// for full CUDA detail over its next N steps (cupti_shim/capture_control.h).
#pragma once

#include "cli/options.h"

namespace gpuos {

// Returns the exit code: 0 when the dump was written, 1 otherwise (one line
// on stderr says why).
int RunCtl(const CtlCommand& command);

}  // namespace gpuos
