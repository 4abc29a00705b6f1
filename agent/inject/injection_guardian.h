// The guardian: a process of its own that runs an injection transaction
// (injection_transaction.h) to its end whatever happens to gpuos-trace, and
// tells gpuos-trace the outcome over a pipe.
//
// gpuos-trace forks a short-lived child that forks the guardian and exits,
// so the guardian is adopted by init (or a subreaper), not gpuos-trace's
// child: gpuos-trace's SIGCHLD handling and wait loops never see it.  The
// guardian starts its own session (Ctrl-C and kills of gpuos-trace's
// process group do not reach it), blocks every signal it can, asks the OOM
// killer to spare it, keeps only stderr and the reply pipe open, and has no
// PR_SET_PDEATHSIG: gpuos-trace dying changes nothing for it.  It exits as
// soon as the transaction is over; its exit also detaches ptrace from
// anything it still holds.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "inject/injection_transaction.h"

namespace gpuos::inject {

// Forks the guardian, waits for its answer (up to the plan's timeout plus
// the time thread choice and the test pause may take) and returns it.
absl::StatusOr<TransactionResult> RunInGuardian(const InjectionPlan& plan);

}  // namespace gpuos::inject
