// `gpuos-trace --pid PID [--pid PID...] | --gpu-procs [--duration D]`:
// traces processes that are already running, with everything they start
// from then on, and leaves them as they were.
//
// Order of work: load the BPF programs; write the header, whose attach
// start is taken before the first process is tracked (nothing earlier can
// be in the trace); track the targets and their /proc descendants
// (rescanning until no new one appears, so a fork during the scan is not
// missed); list the processes and threads that already existed; switch on
// the CUDA side of each CUDA process (cuda_attach.h).  Then record until
// Ctrl-C (SIGINT, SIGTERM, SIGHUP), --duration, or the end of every traced
// process.  Detach: the shims flush and switch off, BPF events after the
// attach end are left out, the last kernel totals are read, and every BPF
// program, map and uprobe is destroyed.  The job never waits on the tracer:
// it is not stopped (but for an injection's brief moment), not a child of
// gpuos-trace, and not signalled.
#pragma once

#include "record/recorder.h"

namespace gpuos {

// 0 when the recording was written; 1 when it could not start (the error
// is printed as one line).
int RunAttach(const RecordOptions& options);

}  // namespace gpuos
