// `gpuos-trace --pid PID [--pid PID...] | --gpu-procs [--duration D]`: the
// recording session's target when the job already runs.  It covers the
// processes named (or found holding a GPU), with everything they start from
// then on, and leaves them as they were.
//
// Prepare tracks the targets and their /proc descendants (rescanning until
// no new one appears, so a fork during the scan is not missed) and opens
// the window: the header's attach start is taken once every process is
// tracked (nothing earlier is in the trace).  Start lists the processes and
// threads that already existed and switches on the CUDA side of each CUDA
// process (running_job_cuda.h).  The recording ends at Ctrl-C (SIGINT,
// SIGTERM, SIGHUP), --duration, or the end of every traced process.  Stop
// detaches: the shims flush and switch off, and BPF events after the attach
// end are left out.  The job never waits on the tracer: it is not stopped
// (but for an injection's brief moment), not a child of gpuos-trace, and
// not signalled.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "record/job_target.h"
#include "record/running_job_cuda.h"

namespace gpuos {

class RunningJob : public JobTarget {
 public:
  explicit RunningJob(const RecordOptions& options) : options_(options) {}

  absl::Status Resolve() override;
  TraceOwnership Ownership() const override;
  std::optional<ShimAccess> ShimSocket() override;
  absl::Status Prepare(SessionParts& parts, v1::TraceHeader* header) override;
  absl::Status Start(SessionParts& parts) override;
  void OnSignal(const signalfd_siginfo& info) override;
  bool Ended(const SessionParts& parts, uint64_t now_ns, bool waited) override;
  void Stop(SessionParts& parts) override;
  void FillTrailer(const Recording& recording, v1::TraceTrailer* trailer) const override;
  std::string EndReason() const override { return stopped_by_; }
  void PrintEnd(const Recording& recording, uint64_t events_written) const override;
  // 0 when the trace was written, else 1.
  int ExitCode(const absl::Status& finished) const override { return finished.ok() ? 0 : 1; }

 private:
  absl::Status TrackTree(SessionParts& parts);
  void AddExisting(SessionParts& parts);
  void AttachCuda(SessionParts& parts);
  void PrintAttached() const;

  const RecordOptions& options_;
  std::vector<pid_t> targets_;  // --pid's and --gpu-procs' processes
  std::set<pid_t> tracked_;     // with their descendants at attach time
  uid_t file_uid_ = 0;
  gid_t file_gid_ = 0;
  std::unique_ptr<RunningJobCuda> cuda_;
  size_t existing_processes_ = 0;
  bool stop_requested_ = false;
  std::string stopped_by_ = "the end of every traced process";
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;
};

}  // namespace gpuos
