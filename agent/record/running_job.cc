// Recording processes that already run; see running_job.h.
#include "record/running_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/valid_utf8.h"
#include "record/host_info.h"
#include "record/install_paths.h"
#include "record/launcher.h"
#include "record/recording.h"
#include "record/running_job_processes.h"

namespace gpuos {
namespace {

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

}  // namespace

absl::Status RunningJob::Resolve() {
  auto targets = ResolveTargets(options_);
  if (!targets.ok()) return targets.status();
  targets_ = std::move(*targets);
  // Who owns the files and sockets gpuos-trace makes: the invoking user
  // under sudo (like a launched trace), else whoever runs gpuos-trace.
  auto run_as = ResolveRunAs(/*run_as_root=*/false);
  const bool sudo = run_as.ok() && run_as->drop_privileges;
  file_uid_ = sudo ? run_as->uid : getuid();
  file_gid_ = sudo ? run_as->gid : getgid();
  return absl::OkStatus();
}

TraceOwnership RunningJob::Ownership() const {
  TraceOwnership owner;
  if (file_uid_ != getuid()) owner.file_uid = file_uid_;
  owner.file_gid = file_gid_;
  owner.run_as_uid = file_uid_;
  owner.run_as_gid = file_gid_;
  return owner;
}

std::optional<ShimAccess> RunningJob::ShimSocket() {
  ShimAccess access;
  // The shim runs as the job's user; its socket directory must let it in.
  access.owner_uid = file_uid_;
  if (auto first = ReadExistingProcess(targets_.front()); first.ok()) access.owner_uid = first->uid;
  access.peer_check = [roots = targets_](pid_t pid, uid_t) {
    for (pid_t root : roots) {
      if (IsDescendantOf(pid, root)) return true;
    }
    return false;
  };
  return access;
}

// Tracks the targets, then their descendants until a scan finds no new one.
absl::Status RunningJob::TrackTree(SessionParts& parts) {
  const std::set<pid_t> roots(targets_.begin(), targets_.end());
  for (int round = 0; round < kMaxScanRounds; ++round) {
    bool added = false;
    for (pid_t pid : DescendantsOf(roots)) {
      if (tracked_.count(pid)) continue;
      absl::Status s = parts.recording.bpf().Track(static_cast<uint32_t>(pid));
      if (absl::IsNotFound(s)) continue;  // it ended during the scan
      if (!s.ok()) return s;
      tracked_.insert(pid);
      added = true;
    }
    if (!added) break;
  }
  return absl::OkStatus();
}

absl::Status RunningJob::Prepare(SessionParts& parts, v1::TraceHeader* header) {
  if (absl::Status s = TrackTree(parts); !s.ok()) return s;
  // The window opens once every process is tracked: earlier events of the
  // first ones are left out, so all of them start together.
  start_ns_ = MonotonicNowNs();
  parts.recording.SetBpfEventWindow(start_ns_, UINT64_MAX);
  for (const auto& arg : ReadCommandLine(targets_.front())) header->add_command_line(ValidUtf8(arg));
  v1::AttachInfo* attach = header->mutable_attach();
  for (pid_t pid : targets_) attach->add_target_pids(static_cast<uint32_t>(pid));
  attach->set_start_ns(start_ns_);
  attach->set_gpu_procs(options_.gpu_procs);
  attach->set_requested_duration_ns(options_.duration_ns);
  return absl::OkStatus();
}

// Lists what already ran at attach time.  Events of processes and threads
// born since tracking began come first, so none is listed twice.
void RunningJob::AddExisting(SessionParts& parts) {
  Recording& recording = parts.recording;
  if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  for (pid_t pid : tracked_) {
    auto process = ReadExistingProcess(pid);
    if (!process.ok()) continue;  // exited meanwhile: its exit is in the trace
    if (!recording.live_processes().count(static_cast<uint32_t>(pid))) {
      recording.AddExistingProcess(pid, process->ppid, process->comm, start_ns_);
      ++existing_processes_;
    }
    for (const ExistingThread& thread : process->threads) {
      if (thread.tid == pid || recording.KnowsThread(static_cast<uint32_t>(thread.tid))) continue;
      recording.AddExistingThread(pid, thread.tid, thread.comm, start_ns_);
    }
  }
}

void RunningJob::AttachCuda(SessionParts& parts) {
  if (!parts.shim_listener) return;
  RunningJobCudaOptions cuda_options;
  cuda_options.shim_path = FindShim(options_.shim_path);
  cuda_options.agent_socket = parts.shim_listener->socket_path();
  cuda_options.inject = options_.inject;
  cuda_options.capture_spec = options_.capture_spec;
  cuda_options.verbose = options_.verbose;
  cuda_ = std::make_unique<RunningJobCuda>(cuda_options, &parts.recording.bpf());
  Recording& recording = parts.recording;
  ShimListener* listener = parts.shim_listener;
  auto pump = [&recording, listener] {
    listener->Pump();
    if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
  };
  for (pid_t pid : tracked_) cuda_->AttachProcess(pid, pump);
}

void RunningJob::PrintAttached() const {
  std::vector<std::string> names;
  for (pid_t pid : targets_) names.push_back(absl::StrFormat("%d", pid));
  fprintf(stderr, "gpuos-trace: attached to pid %s (%zu processes with descendants); %s\n",
          absl::StrJoin(names, ", ").c_str(), tracked_.size(),
          options_.duration_ns ? absl::StrFormat("recording for %.3g s (Ctrl-C stops sooner)",
                                                 options_.duration_ns / 1e9).c_str()
                               : "recording until Ctrl-C or the job's end");
  if (!cuda_) return;
  for (const v1::CudaAttachStatus& s : cuda_->statuses()) {
    fprintf(stderr, "gpuos-trace: pid %u CUDA: %s%s%s\n", s.pid(), s.mode().c_str(),
            s.detail().empty() ? "" : ": ", s.detail().c_str());
  }
}

absl::Status RunningJob::Start(SessionParts& parts) {
  AddExisting(parts);
  AttachCuda(parts);
  if (!options_.quiet) PrintAttached();
  return absl::OkStatus();
}

void RunningJob::OnSignal(const signalfd_siginfo& info) {
  if (info.ssi_signo == SIGCHLD) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    return;
  }
  stop_requested_ = true;
  stopped_by_ = info.ssi_signo == SIGINT ? "Ctrl-C" : strsignal(static_cast<int>(info.ssi_signo));
}

bool RunningJob::Ended(const SessionParts& parts, uint64_t now_ns, bool waited) {
  if (!waited) return false;
  bool ended = stop_requested_;
  if (options_.duration_ns && now_ns - start_ns_ >= options_.duration_ns) {
    ended = true;
    stopped_by_ = "--duration";
  }
  return ended || parts.recording.live_processes().empty();
}

void RunningJob::Stop(SessionParts& parts) {
  // The shims flush first, while everything still records.
  if (cuda_ && parts.shim_listener) {
    Recording& recording = parts.recording;
    ShimListener* listener = parts.shim_listener;
    cuda_->DetachAll([&recording, listener] {
      listener->Pump();
      if (auto consumed = recording.bpf().Consume(); !consumed.ok()) PrintError(consumed.status());
    });
  }
  end_ns_ = MonotonicNowNs();
  parts.recording.SetBpfEventWindow(start_ns_, end_ns_);
}

void RunningJob::FillTrailer(const Recording& recording, v1::TraceTrailer* trailer) const {
  trailer->set_attach_end_ns(end_ns_);
  if (!cuda_) return;
  for (v1::CudaAttachStatus status : cuda_->statuses()) {
    auto it = recording.kernels_by_pid().find(status.pid());
    if (it != recording.kernels_by_pid().end()) status.set_kernels(it->second);
    *trailer->add_cuda_attach() = status;
  }
}

void RunningJob::PrintEnd(const Recording& recording, uint64_t events_written) const {
  fprintf(stderr,
          "gpuos-trace: detached after %.3f s (%s); recorded %llu events from %zu processes, "
          "%zu threads (%zu processes were already running)\n",
          (end_ns_ - start_ns_) / 1e9, stopped_by_.c_str(), static_cast<unsigned long long>(events_written),
          recording.processes_seen(), recording.threads_seen(), existing_processes_);
}

}  // namespace gpuos
