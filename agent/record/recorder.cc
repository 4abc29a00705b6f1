// The recording loop; see recorder.h.
#include "record/recorder.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/valid_utf8.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "record/bpf_session.h"
#include "record/event_decoder.h"
#include "record/host_info.h"
#include "record/launcher.h"
#include "record/preflight.h"
#include "record/install_paths.h"
#include "record/recording.h"
#include "record/recording_summary.h"
#include "record/shim_environment.h"
#include "record/shim_listener.h"
#include "record/flight_control.h"
#include "record/trace_sink.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

// The agent drains the ring buffer on this timer; the kernel side wakes it
// sooner only when the buffer fills up (common.bpf.h: wakeup_bytes).
constexpr int kTickMs = 50;
constexpr uint64_t kSnapshotIntervalNs = 1'000'000'000;

void PrintError(const absl::Status& status) {
  fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int RunRecord(const RecordOptions& options) {
  for (absl::Status status : {CheckPrivileges(), CheckKernelBtf(options.btf_path), EnsureTracefs()}) {
    if (!status.ok()) {
      PrintError(status);
      return 1;
    }
  }
  auto run_as = ResolveRunAs(options.run_as_root);
  if (!run_as.ok()) {
    PrintError(run_as.status());
    return 1;
  }

  auto sink = OpenTraceSink(options, run_as->drop_privileges ? run_as->uid : static_cast<uid_t>(-1),
                            run_as->drop_privileges ? run_as->gid : static_cast<gid_t>(-1));
  if (!sink.ok()) {
    PrintError(sink.status());
    return 1;
  }
  EventSink* writer = sink->sink.get();

  Recording recording(options, writer);
  if (sink->flight) recording.SetFlightRecorder(sink->flight);
  if (absl::Status s = recording.StartBpf(); !s.ok()) {
    PrintError(s);
    writer->Close().IgnoreError();
    unlink(options.output_path.c_str());
    return 1;
  }

  auto signal_fd = sink->flight ? OpenSignalFd({SIGUSR1}) : OpenSignalFd();
  if (!signal_fd.ok()) {
    PrintError(signal_fd.status());
    return 1;
  }

  LaunchOptions launch;
  launch.argv = options.command;
  launch.run_as = *run_as;

  std::unique_ptr<ShimListener> shim_listener;
  if (options.cuda) {
    std::string shim = FindShim(options.shim_path);
    if (shim.empty()) {
      fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
              options.shim_path.empty()
                  ? "the CUDA shim (libgpuos_shim.so) is not installed next to gpuos-trace"
                  : ("cannot read the CUDA shim " + options.shim_path).c_str());
    } else {
      uid_t owner = run_as->drop_privileges ? run_as->uid : getuid();
      gid_t group = run_as->drop_privileges ? run_as->gid : getgid();
      pid_t self = getpid();
      auto listener = ShimListener::Create(
          owner, group,
          [owner, self](pid_t pid, uid_t uid) {
            return (uid == owner || uid == 0) && pid != self && IsDescendantOf(pid, self);
          },
          [&recording](const v1::Event& event) { recording.OnShimEvent(event); });
      if (!listener.ok()) {
        fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
                std::string(listener.status().message()).c_str());
      } else {
        shim_listener = std::move(*listener);
        launch.extra_env = ShimEnvironment(shim, shim_listener->socket_path(),
                                           options.python_hooks ? FindPythonHooks() : "",
                                           options.cuda_records, options.capture_spec);
      }
    }
  }
  auto command = LaunchedCommand::Prepare(launch);
  if (!command.ok()) {
    PrintError(command.status());
    return 1;
  }
  pid_t root = (*command)->pid();

  v1::TraceHeader header;
  FillHostInfo(&header);
  header.set_tracer_version(GPUOS_VERSION);
  for (const auto& arg : options.command) header.add_command_line(ValidUtf8(arg));
  for (const auto& arg : options.tracer_argv) header.add_tracer_argv(ValidUtf8(arg));
  header.set_tracer_pid(getpid());
  header.set_root_pid(root);
  header.set_run_as_uid(run_as->drop_privileges ? run_as->uid : getuid());
  header.set_run_as_gid(run_as->drop_privileges ? run_as->gid : getgid());
  header.set_fault_window_ns(options.fault_window_ns);
  header.set_ring_buffer_bytes(options.ring_buffer_bytes);
  header.set_capture_spec(options.capture_spec);
  if (absl::Status s = writer->WriteHeader(header); !s.ok()) {
    PrintError(s);
    return 1;
  }

  // Registered before it execs: nothing the command does is missed.
  if (absl::Status s = recording.bpf().Track(root); !s.ok()) {
    PrintError(s);
    return 1;
  }
  recording.AddRoot(root, options.command[0]);
  uint64_t start_ns = MonotonicNowNs();
  if (absl::Status s = (*command)->Release(); !s.ok()) PrintError(s);

  int epoll_fd = OpenEventPoll({recording.bpf().ring_buffer_fd(), *signal_fd,
                                shim_listener ? shim_listener->poll_fd() : -1});

  bool tree_done = (*command)->ReapChildren();
  uint64_t last_snapshot = MonotonicNowNs();
  while (!tree_done) {
    epoll_event ready[3];
    int n = epoll_wait(epoll_fd, ready, 3, kTickMs);
    if (n < 0 && errno != EINTR) break;
    if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    if (shim_listener) shim_listener->Pump();
    signalfd_siginfo info{};
    while (read(*signal_fd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGCHLD) continue;  // reaped below
      if (info.ssi_signo == SIGUSR1) {
        recording.DumpFlight(FlightDumpReason(info));
        continue;
      }
      if (ShouldForwardSignal(info.ssi_code)) (*command)->Forward(static_cast<int>(info.ssi_signo));
    }
    tree_done = (*command)->ReapChildren();
    uint64_t now = MonotonicNowNs();
    if (now - last_snapshot >= kSnapshotIntervalNs) {
      recording.Snapshot(/*final=*/false);
      last_snapshot = now;
    }
  }
  close(epoll_fd);
  uint64_t end_ns = MonotonicNowNs();

  // The tree is gone: whatever is in the ring buffer is all there will be.
  if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  if (shim_listener) shim_listener->Pump(/*until_closed=*/true);
  recording.Snapshot(/*final=*/true);
  // What the kernel side still holds (threads that outlive the tree).
  recording.StopBpf();

  int exit_code = (*command)->exit_code();
  v1::TraceTrailer trailer;
  if ((*command)->wait_status()) {
    trailer.set_root_exited(true);
    trailer.set_root_wait_status(*(*command)->wait_status());
  }
  if (sink->flight) sink->flight->set_end_reason("the end of the recording (the command ended)");
  recording.Finish(trailer).IgnoreError();  // printed; the command's status still counts
  if (!options.quiet) {
    fprintf(stderr,
            "gpuos-trace: %s exited with %d after %.3f s; recorded %llu events from %zu "
            "processes, %zu threads\n",
            Basename(options.command[0]).c_str(), exit_code, (end_ns - start_ns) / 1e9,
            static_cast<unsigned long long>(writer->events_written()),
            recording.processes_seen(), recording.threads_seen());
    PrintRecordingSummary(recording, shim_listener.get(), options.output_path);
  }
  return exit_code;
}

}  // namespace gpuos
