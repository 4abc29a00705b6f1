// Ctrl-C and SIGTERM for gpuos-trainer: the first one asks the trainer to
// stop at the next step boundary (or while it waits for a batch) so that it
// can tear its data workers down; a second one kills it outright, and the
// workers then die through PR_SET_PDEATHSIG.
#pragma once

namespace gpuos::trainer {

// Installs the handlers (without SA_RESTART, so a blocked wait returns EINTR).
void InstallShutdownHandlers();

// The signal that asked for a stop, or 0.
int ShutdownSignal();

inline bool ShutdownRequested() { return ShutdownSignal() != 0; }

}  // namespace gpuos::trainer
