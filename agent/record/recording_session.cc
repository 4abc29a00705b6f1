// The one recording path of launch and attach; see recording_session.h.
#include "record/recording_session.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "common/valid_utf8.h"
#include "record/bench_toggle.h"
#include "record/flight_control.h"
#include "record/host_info.h"
#include "record/launcher.h"
#include "record/preflight.h"
#include "record/recording.h"
#include "record/recording_summary.h"
#include "record/shim_listener.h"
#include "record/trace_sink.h"

namespace gpuos {
namespace {

// The agent drains the ring buffer on this timer; the kernel side wakes it
// sooner only when the buffer fills up (common.bpf.h: wakeup_bytes).
constexpr int kTickMs = 50;
constexpr uint64_t kSnapshotIntervalNs = 1'000'000'000;

void PrintError(const absl::Status& status) {
  fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
}

class RecordingSession {
 public:
  RecordingSession(const RecordOptions& options, JobTarget& target) : options_(options), target_(target) {}
  ~RecordingSession() {
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  int Run();

 private:
  // Everything up to the loaded BPF programs and the signalfd.
  absl::Status Open();
  void OpenShimSocket();
  absl::Status WriteHeader();
  void Loop();
  void DrainSignals();
  int Finish();

  const RecordOptions& options_;
  JobTarget& target_;
  TraceSink sink_;
  std::unique_ptr<Recording> recording_;
  std::unique_ptr<ShimListener> shim_listener_;
  std::unique_ptr<SessionParts> parts_;
  int signal_fd_ = -1;
  int epoll_fd_ = -1;
};

absl::Status RecordingSession::Open() {
  for (absl::Status status : {CheckPrivileges(), CheckKernelBtf(options_.btf_path), EnsureTracefs()}) {
    if (!status.ok()) return status;
  }
  if (absl::Status s = target_.Resolve(); !s.ok()) return s;
  const TraceOwnership owner = target_.Ownership();
  auto sink = OpenTraceSink(options_, owner.file_uid, owner.file_gid);
  if (!sink.ok()) return sink.status();
  sink_ = std::move(*sink);
  recording_ = std::make_unique<Recording>(options_, sink_.sink.get());
  if (sink_.flight) recording_->SetFlightRecorder(sink_.flight);
  if (absl::Status s = recording_->StartBpf(); !s.ok()) {
    sink_.sink->Close().IgnoreError();
    unlink(options_.output_path.c_str());
    return s;
  }
  auto signal_fd = sink_.flight ? OpenSignalFd({SIGUSR1}) : OpenSignalFd();
  if (!signal_fd.ok()) return signal_fd.status();
  signal_fd_ = *signal_fd;
  return absl::OkStatus();
}

void RecordingSession::OpenShimSocket() {
  if (!options_.cuda) return;
  std::optional<ShimAccess> access = target_.ShimSocket();
  if (!access) return;
  Recording* recording = recording_.get();
  auto listener = ShimListener::Create(access->owner_uid, access->owner_gid, std::move(access->peer_check),
                                       [recording](const v1::Event& event) { recording->OnShimEvent(event); });
  if (!listener.ok()) {
    fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
            std::string(listener.status().message()).c_str());
    return;
  }
  shim_listener_ = std::move(*listener);
}

absl::Status RecordingSession::WriteHeader() {
  const TraceOwnership owner = target_.Ownership();
  v1::TraceHeader header;
  FillHostInfo(&header);
  header.set_tracer_version(GPUOS_VERSION);
  for (const auto& arg : options_.tracer_argv) header.add_tracer_argv(ValidUtf8(arg));
  header.set_tracer_pid(getpid());
  header.set_run_as_uid(owner.run_as_uid);
  header.set_run_as_gid(owner.run_as_gid);
  header.set_fault_window_ns(options_.fault_window_ns);
  header.set_ring_buffer_bytes(options_.ring_buffer_bytes);
  header.set_capture_spec(options_.capture_spec);
  if (absl::Status s = target_.Prepare(*parts_, &header); !s.ok()) return s;
  return sink_.sink->WriteHeader(header);
}

void RecordingSession::DrainSignals() {
  signalfd_siginfo info{};
  while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo == SIGUSR1) {
      recording_->DumpFlight(FlightDumpReason(info));
      continue;
    }
    target_.OnSignal(info);
  }
}

void RecordingSession::Loop() {
  epoll_fd_ = OpenEventPoll({recording_->bpf().ring_buffer_fd(), signal_fd_,
                             shim_listener_ ? shim_listener_->poll_fd() : -1});
  uint64_t last_snapshot = MonotonicNowNs();
  bool ended = target_.Ended(*parts_, last_snapshot, /*waited=*/false);
  std::unique_ptr<BenchToggle> toggle = BenchToggle::FromEnvironment(options_.attach_pids);
  while (!ended) {
    epoll_event ready[3];
    int n = epoll_wait(epoll_fd_, ready, 3, kTickMs);
    if (n < 0 && errno != EINTR) break;
    if (auto consumed = recording_->bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    if (shim_listener_) shim_listener_->Pump();
    DrainSignals();
    const uint64_t now = MonotonicNowNs();
    if (toggle) toggle->Tick(recording_->bpf(), now);
    ended = target_.Ended(*parts_, now, /*waited=*/true);
    if (!ended && now - last_snapshot >= kSnapshotIntervalNs) {
      recording_->Snapshot(/*final=*/false);
      last_snapshot = now;
    }
  }
  close(epoll_fd_);
  epoll_fd_ = -1;
}

int RecordingSession::Finish() {
  target_.Stop(*parts_);
  // The job is gone or let go: whatever is in the ring buffer is all there
  // will be.
  if (auto consumed = recording_->bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  if (shim_listener_) shim_listener_->Pump(/*until_closed=*/true);
  recording_->Snapshot(/*final=*/true);
  // Every program, map and uprobe of ours leaves the kernel; what the
  // kernel side still held (threads that outlive the job) is recorded.
  recording_->StopBpf();

  v1::TraceTrailer trailer;
  target_.FillTrailer(*recording_, &trailer);
  if (sink_.flight) sink_.flight->set_end_reason("the end of the recording (" + target_.EndReason() + ")");
  const absl::Status finished = recording_->Finish(trailer);  // a failure is printed
  if (!options_.quiet) {
    target_.PrintEnd(*recording_, sink_.sink->events_written());
    PrintRecordingSummary(*recording_, shim_listener_.get(), options_.output_path);
  }
  return target_.ExitCode(finished);
}

int RecordingSession::Run() {
  if (absl::Status s = Open(); !s.ok()) {
    PrintError(s);
    return 1;
  }
  OpenShimSocket();
  parts_ = std::make_unique<SessionParts>(SessionParts{options_, *recording_, shim_listener_.get()});
  if (absl::Status s = WriteHeader(); !s.ok()) {
    PrintError(s);
    return 1;
  }
  if (absl::Status s = target_.Start(*parts_); !s.ok()) {
    PrintError(s);
    return 1;
  }
  Loop();
  return Finish();
}

}  // namespace

int RunRecordingSession(const RecordOptions& options, JobTarget& target) {
  RecordingSession session(options, target);
  return session.Run();
}

}  // namespace gpuos
