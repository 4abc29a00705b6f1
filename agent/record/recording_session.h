// One recording from start to end, the same for a launched command and for
// an attach to running processes; what differs is the JobTarget.
//
// Order of work: check privileges, BTF and tracefs; resolve the target;
// open the trace file (or the flight recorder); load the BPF programs; take
// SIGINT, SIGTERM, SIGHUP, SIGCHLD (and SIGUSR1 for a flight recorder)
// through a signalfd; open the shim's socket; let the target prepare the
// job and write the header; start the job; then drain the ring buffer and
// the shim socket every 50 ms (sooner when the buffer fills) and write the
// kernel totals every second, until the target says the job is over.  At
// the end: the target lets the job go, the last events are read, the BPF
// programs leave the kernel, the trailer is written, and a short summary
// goes to stderr.
#pragma once

#include "record/job_target.h"
#include "record/record_options.h"

namespace gpuos {

// Returns what gpuos-trace exits with (JobTarget::ExitCode), or 1 when the
// recording could not start; errors are printed as one line on stderr.
int RunRecordingSession(const RecordOptions& options, JobTarget& target);

}  // namespace gpuos
