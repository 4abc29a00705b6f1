// `gpuos-trace --prepare -- cmd`: runs cmd with the shim loaded but idle
// (GPUOS_SHIM_PREPARED=1), for sites that forbid ptrace.  gpuos-trace
// replaces itself with the command (exec): nothing of the tracer stays
// around, and no privileges are needed.  A later `gpuos-trace --pid` finds
// the shim's control socket and switches recording on; detaching switches
// it off again.
#pragma once

#include "record/record_options.h"

namespace gpuos {

// Returns only on failure: 127 when the command cannot be run, 1 when the
// shim is missing; the error is printed as one line.
int RunPrepared(const RecordOptions& options);

}  // namespace gpuos
