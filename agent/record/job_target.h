// What differs between recording a command gpuos-trace launches
// (launched_job.h) and recording processes that already run (running_job.h):
// how the job is found and started, who owns the files, which processes may
// talk to the shim's socket, when the recording ends, and what the trailer
// and the last line on stderr say.  Everything else is one path: the
// recording session (recording_session.h) calls these hooks in order.
#pragma once

#include <sys/signalfd.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gpuos_trace.pb.h"
#include "record/record_options.h"
#include "record/shim_listener.h"

namespace gpuos {

class Recording;

// The parts of a running session that a target works with.
struct SessionParts {
  const RecordOptions& options;
  Recording& recording;
  ShimListener* shim_listener = nullptr;  // null: no CUDA side
};

// Who the trace belongs to.
struct TraceOwnership {
  // The trace file (and flight recorder's files) go to this owner; -1: keep
  // gpuos-trace's own.
  uid_t file_uid = static_cast<uid_t>(-1);
  gid_t file_gid = static_cast<gid_t>(-1);
  // The header's run_as_uid / run_as_gid.
  uid_t run_as_uid = 0;
  gid_t run_as_gid = 0;
};

// Who may connect to the shim's socket (ShimListener::Create).
struct ShimAccess {
  uid_t owner_uid = 0;
  gid_t owner_gid = static_cast<gid_t>(-1);
  ShimListener::PeerCheck peer_check;
};

class JobTarget {
 public:
  virtual ~JobTarget() = default;

  // Before anything opens: find the job (or who runs the command).  An
  // error ends the recording before it starts.
  virtual absl::Status Resolve() = 0;
  virtual TraceOwnership Ownership() const = 0;
  // The shim's socket, when the CUDA side is on; nullopt: no socket (a
  // warning has been printed).
  virtual std::optional<ShimAccess> ShimSocket() = 0;

  // Makes the job ready to record (BPF is loaded, the shim socket is open)
  // and fills what the header says about it; the header is written next.
  virtual absl::Status Prepare(SessionParts& parts, v1::TraceHeader* header) = 0;
  // After the header: lets the job run, or lists what already runs.
  virtual absl::Status Start(SessionParts& parts) = 0;

  // A signal from the session's signalfd other than SIGUSR1 (the flight
  // recorder's, which the session handles).
  virtual void OnSignal(const signalfd_siginfo& info) = 0;
  // Whether the recording is over; asked before the first wait
  // (`waited` false) and after each.
  virtual bool Ended(const SessionParts& parts, uint64_t now_ns, bool waited) = 0;
  // The loop has ended: lets the job go (a detach) while events still flow.
  virtual void Stop(SessionParts& parts) = 0;

  // What the trailer says particular to this target.
  virtual void FillTrailer(const Recording& recording, v1::TraceTrailer* trailer) const = 0;
  // Why the recording ended, for the flight recorder ("the command ended").
  virtual std::string EndReason() const = 0;
  // The line that sums the recording up on stderr (not under --quiet).
  virtual void PrintEnd(const Recording& recording, uint64_t events_written) const = 0;
  // What gpuos-trace exits with, given how the trace file was finished.
  virtual int ExitCode(const absl::Status& finished) const = 0;
};

}  // namespace gpuos
