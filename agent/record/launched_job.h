// `gpuos-trace [options] -- cmd args...`: the recording session's target
// when gpuos-trace starts the command itself (launcher.h).  The command is
// registered with the BPF programs before it execs, so nothing it does is
// missed; the recording ends when its whole process tree has ended; signals
// sent to gpuos-trace by another process are passed on to it; gpuos-trace
// exits with the command's status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "record/job_target.h"
#include "record/launcher.h"

namespace gpuos {

class LaunchedJob : public JobTarget {
 public:
  explicit LaunchedJob(const RecordOptions& options) : options_(options) {}

  absl::Status Resolve() override;
  TraceOwnership Ownership() const override;
  std::optional<ShimAccess> ShimSocket() override;
  absl::Status Prepare(SessionParts& parts, v1::TraceHeader* header) override;
  absl::Status Start(SessionParts& parts) override;
  void OnSignal(const signalfd_siginfo& info) override;
  bool Ended(const SessionParts& parts, uint64_t now_ns, bool waited) override;
  void Stop(SessionParts& parts) override;
  void FillTrailer(const Recording& recording, v1::TraceTrailer* trailer) const override;
  std::string EndReason() const override { return "the command ended"; }
  void PrintEnd(const Recording& recording, uint64_t events_written) const override;
  // The command's exit code (128 + signal when it was killed, 127 when it
  // could not be run), whatever became of the trace file.
  int ExitCode(const absl::Status& finished) const override;

 private:
  const RecordOptions& options_;
  RunAs run_as_;
  std::string shim_;  // the shim library; empty: none
  std::unique_ptr<LaunchedCommand> command_;
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;
};

}  // namespace gpuos
