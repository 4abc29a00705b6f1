// Attaching to running processes; see attach_recorder.h.
#include "record/attach_recorder.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/valid_utf8.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "record/attach_targets.h"
#include "record/bpf_session.h"
#include "record/cuda_attach.h"
#include "record/host_info.h"
#include "record/install_paths.h"
#include "record/launcher.h"
#include "record/preflight.h"
#include "record/recording.h"
#include "record/recording_summary.h"
#include "record/shim_listener.h"
#include "record/flight_control.h"
#include "record/trace_sink.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr int kTickMs = 50;
constexpr uint64_t kSnapshotIntervalNs = 1'000'000'000;
// A fork racing the /proc scan is caught by the next round; a tree that
// keeps forking faster than we scan is followed by the kernel side anyway
// once its parent is tracked.
constexpr int kMaxScanRounds = 8;

void PrintError(const absl::Status& status) {
  fprintf(stderr, "gpuos-trace: %s\n", std::string(status.message()).c_str());
}

// The processes to attach to: --pid's, checked, and --gpu-procs' finds.
absl::StatusOr<std::vector<pid_t>> ResolveTargets(const RecordOptions& options) {
  std::vector<pid_t> targets;
  for (int pid : options.attach_pids) {
    if (absl::Status s = CheckAttachTarget(pid); !s.ok()) return s;
    targets.push_back(pid);
  }
  if (options.gpu_procs) {
    std::vector<pid_t> gpu = FindGpuProcesses();
    if (gpu.empty() && targets.empty()) {
      return absl::NotFoundError(
          "--gpu-procs: no process holds a GPU context (none has /dev/nvidiaN open or libcuda "
          "mapped)");
    }
    for (pid_t pid : gpu) {
      if (CheckAttachTarget(pid).ok() &&
          std::find(targets.begin(), targets.end(), pid) == targets.end()) {
        targets.push_back(pid);
      }
    }
  }
  return targets;
}

// Who owns the files and sockets gpuos-trace makes: the invoking user under
// sudo (like a launched trace), else whoever runs gpuos-trace.
std::pair<uid_t, gid_t> FileOwner() {
  auto run_as = ResolveRunAs(/*run_as_root=*/false);
  if (run_as.ok() && run_as->drop_privileges) return {run_as->uid, run_as->gid};
  return {getuid(), getgid()};
}

}  // namespace

int RunAttach(const RecordOptions& options) {
  for (absl::Status status : {CheckPrivileges(), CheckKernelBtf(options.btf_path), EnsureTracefs()}) {
    if (!status.ok()) {
      PrintError(status);
      return 1;
    }
  }
  auto targets = ResolveTargets(options);
  if (!targets.ok()) {
    PrintError(targets.status());
    return 1;
  }
  auto [file_uid, file_gid] = FileOwner();
  auto sink = OpenTraceSink(options, file_uid != getuid() ? file_uid : static_cast<uid_t>(-1), file_gid);
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

  // Track the targets, then their descendants until a scan finds no new one.
  std::set<pid_t> roots(targets->begin(), targets->end());
  std::set<pid_t> tracked;
  for (int round = 0; round < kMaxScanRounds; ++round) {
    bool added = false;
    for (pid_t pid : DescendantsOf(roots)) {
      if (tracked.count(pid)) continue;
      absl::Status s = recording.bpf().Track(static_cast<uint32_t>(pid));
      if (absl::IsNotFound(s)) continue;  // it ended during the scan
      if (!s.ok()) {
        PrintError(s);
        return 1;
      }
      tracked.insert(pid);
      added = true;
    }
    if (!added) break;
  }
  // The window opens once every process is tracked: earlier events of the
  // first ones are left out, so all of them start together.
  const uint64_t start_ns = MonotonicNowNs();
  recording.SetBpfEventWindow(start_ns, UINT64_MAX);
  v1::TraceHeader header;
  FillHostInfo(&header);
  header.set_tracer_version(GPUOS_VERSION);
  for (const auto& arg : ReadCommandLine(targets->front())) header.add_command_line(ValidUtf8(arg));
  for (const auto& arg : options.tracer_argv) header.add_tracer_argv(ValidUtf8(arg));
  header.set_tracer_pid(getpid());
  header.set_run_as_uid(file_uid);
  header.set_run_as_gid(file_gid);
  header.set_fault_window_ns(options.fault_window_ns);
  header.set_ring_buffer_bytes(options.ring_buffer_bytes);
  header.set_capture_spec(options.capture_spec);
  v1::AttachInfo* attach = header.mutable_attach();
  for (pid_t pid : *targets) attach->add_target_pids(static_cast<uint32_t>(pid));
  attach->set_start_ns(start_ns);
  attach->set_gpu_procs(options.gpu_procs);
  attach->set_requested_duration_ns(options.duration_ns);
  if (absl::Status s = writer->WriteHeader(header); !s.ok()) {
    PrintError(s);
    return 1;
  }

  // Events of processes and threads born since tracking began come first,
  // so what is listed below as already running is not listed twice.
  if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  size_t existing_processes = 0;
  for (pid_t pid : tracked) {
    auto process = ReadExistingProcess(pid);
    if (!process.ok()) continue;  // exited meanwhile: its exit is in the trace
    if (!recording.live_processes().count(static_cast<uint32_t>(pid))) {
      recording.AddExistingProcess(pid, process->ppid, process->comm, start_ns);
      ++existing_processes;
    }
    for (const ExistingThread& thread : process->threads) {
      if (thread.tid == pid || recording.KnowsThread(static_cast<uint32_t>(thread.tid))) continue;
      recording.AddExistingThread(pid, thread.tid, thread.comm, start_ns);
    }
  }

  // The CUDA side.
  std::unique_ptr<ShimListener> shim_listener;
  std::unique_ptr<CudaAttacher> cuda;
  if (options.cuda) {
    // The shim runs as the job's user; its socket directory must let it in.
    uid_t job_uid = file_uid;
    if (auto first = ReadExistingProcess(targets->front()); first.ok()) job_uid = first->uid;
    std::vector<pid_t> roots_list(roots.begin(), roots.end());
    auto listener = ShimListener::Create(
        job_uid, static_cast<gid_t>(-1),
        [roots_list](pid_t pid, uid_t) {
          for (pid_t root : roots_list) {
            if (IsDescendantOf(pid, root)) return true;
          }
          return false;
        },
        [&recording](const v1::Event& event) { recording.OnShimEvent(event); });
    if (!listener.ok()) {
      fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
              std::string(listener.status().message()).c_str());
    } else {
      shim_listener = std::move(*listener);
      CudaAttachOptions cuda_options;
      cuda_options.shim_path = FindShim(options.shim_path);
      cuda_options.agent_socket = shim_listener->socket_path();
      cuda_options.inject = options.inject;
      cuda_options.capture_spec = options.capture_spec;
      cuda_options.verbose = options.verbose;
      cuda = std::make_unique<CudaAttacher>(cuda_options, &recording.bpf());
      ShimListener* l = shim_listener.get();
      auto pump = [&recording, l] {
        l->Pump();
        if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
      };
      for (pid_t pid : tracked) cuda->AttachProcess(pid, pump);
    }
  }
  if (!options.quiet) {
    std::vector<std::string> names;
    for (pid_t pid : *targets) names.push_back(absl::StrFormat("%d", pid));
    fprintf(stderr,
            "gpuos-trace: attached to pid %s (%zu processes with descendants); %s\n",
            absl::StrJoin(names, ", ").c_str(), tracked.size(),
            options.duration_ns ? absl::StrFormat("recording for %.3g s (Ctrl-C stops sooner)",
                                                  options.duration_ns / 1e9).c_str()
                                : "recording until Ctrl-C or the job's end");
    if (cuda) {
      for (const v1::CudaAttachStatus& s : cuda->statuses()) {
        fprintf(stderr, "gpuos-trace: pid %u CUDA: %s%s%s\n", s.pid(), s.mode().c_str(),
                s.detail().empty() ? "" : ": ", s.detail().c_str());
      }
    }
  }

  int epoll_fd = OpenEventPoll({recording.bpf().ring_buffer_fd(), *signal_fd,
                                shim_listener ? shim_listener->poll_fd() : -1});

  const char* stopped_by = "the end of every traced process";
  uint64_t last_snapshot = MonotonicNowNs();
  for (;;) {
    epoll_event ready[3];
    int n = epoll_wait(epoll_fd, ready, 3, kTickMs);
    if (n < 0 && errno != EINTR) break;
    if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    if (shim_listener) shim_listener->Pump();
    bool stop = false;
    signalfd_siginfo info{};
    while (read(*signal_fd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGCHLD) {
        while (waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        continue;
      }
      if (info.ssi_signo == SIGUSR1) {
        recording.DumpFlight(FlightDumpReason(info));
        continue;
      }
      stop = true;
      stopped_by = info.ssi_signo == SIGINT ? "Ctrl-C" : strsignal(static_cast<int>(info.ssi_signo));
    }
    uint64_t now = MonotonicNowNs();
    if (options.duration_ns && now - start_ns >= options.duration_ns) {
      stop = true;
      stopped_by = "--duration";
    }
    if (recording.live_processes().empty()) stop = true;
    if (stop) break;
    if (now - last_snapshot >= kSnapshotIntervalNs) {
      recording.Snapshot(/*final=*/false);
      last_snapshot = now;
    }
  }
  close(epoll_fd);

  // Detach.  The shims flush first, while everything still records.
  if (cuda && shim_listener) {
    ShimListener* l = shim_listener.get();
    cuda->DetachAll([&recording, l] {
      l->Pump();
      if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    });
  }
  const uint64_t end_ns = MonotonicNowNs();
  recording.SetBpfEventWindow(start_ns, end_ns);
  if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  if (shim_listener) shim_listener->Pump(/*until_closed=*/true);
  recording.Snapshot(/*final=*/true);
  recording.StopBpf();  // every program, map and uprobe of ours leaves the kernel

  v1::TraceTrailer trailer;
  trailer.set_attach_end_ns(end_ns);
  if (cuda) {
    for (v1::CudaAttachStatus status : cuda->statuses()) {
      auto it = recording.kernels_by_pid().find(status.pid());
      if (it != recording.kernels_by_pid().end()) status.set_kernels(it->second);
      *trailer.add_cuda_attach() = status;
    }
  }
  if (sink->flight) sink->flight->set_end_reason(std::string("the end of the recording (") + stopped_by + ")");
  const absl::Status closed = recording.Finish(trailer);
  if (!options.quiet) {
    fprintf(stderr,
            "gpuos-trace: detached after %.3f s (%s); recorded %llu events from %zu processes, "
            "%zu threads (%zu processes were already running)\n",
            (end_ns - start_ns) / 1e9, stopped_by,
            static_cast<unsigned long long>(writer->events_written()),
            recording.processes_seen(), recording.threads_seen(), existing_processes);
    PrintRecordingSummary(recording, shim_listener.get(), options.output_path);
  }
  return closed.ok() ? 0 : 1;
}

}  // namespace gpuos
