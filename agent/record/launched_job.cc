// Recording a command gpuos-trace launches; see launched_job.h.
#include "record/launched_job.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "common/path_name.h"
#include "common/valid_utf8.h"
#include "record/host_info.h"
#include "record/install_paths.h"
#include "record/recording.h"
#include "record/shim_environment.h"

namespace gpuos {
namespace {

}  // namespace

absl::Status LaunchedJob::Resolve() {
  auto run_as = ResolveRunAs(options_.run_as_root);
  if (!run_as.ok()) return run_as.status();
  run_as_ = *run_as;
  return absl::OkStatus();
}

TraceOwnership LaunchedJob::Ownership() const {
  TraceOwnership owner;
  if (run_as_.drop_privileges) {
    owner.file_uid = run_as_.uid;
    owner.file_gid = run_as_.gid;
  }
  owner.run_as_uid = run_as_.drop_privileges ? run_as_.uid : getuid();
  owner.run_as_gid = run_as_.drop_privileges ? run_as_.gid : getgid();
  return owner;
}

std::optional<ShimAccess> LaunchedJob::ShimSocket() {
  shim_ = FindShim(options_.shim_path);
  if (shim_.empty()) {
    fprintf(stderr, "gpuos-trace: warning: %s; recording OS events only\n",
            options_.shim_path.empty()
                ? "the CUDA shim (libgpuos_shim.so) is not installed next to gpuos-trace"
                : ("cannot read the CUDA shim " + options_.shim_path).c_str());
    return std::nullopt;
  }
  const TraceOwnership owner = Ownership();
  ShimAccess access;
  access.owner_uid = owner.run_as_uid;
  access.owner_gid = owner.run_as_gid;
  // Only the launched tree, running as the command's user (or root).
  access.peer_check = [uid = owner.run_as_uid, self = getpid()](pid_t pid, uid_t peer_uid) {
    return (peer_uid == uid || peer_uid == 0) && pid != self && IsDescendantOf(pid, self);
  };
  return access;
}

absl::Status LaunchedJob::Prepare(SessionParts& parts, v1::TraceHeader* header) {
  LaunchOptions launch;
  launch.argv = options_.command;
  launch.run_as = run_as_;
  if (parts.shim_listener) {
    launch.extra_env = ShimEnvironment(shim_, parts.shim_listener->socket_path(),
                                       options_.python_hooks ? FindPythonHooks() : "",
                                       options_.cuda_records, options_.capture_spec);
  }
  auto command = LaunchedCommand::Prepare(launch);
  if (!command.ok()) return command.status();
  command_ = std::move(*command);
  for (const auto& arg : options_.command) header->add_command_line(ValidUtf8(arg));
  header->set_root_pid(command_->pid());
  return absl::OkStatus();
}

absl::Status LaunchedJob::Start(SessionParts& parts) {
  const pid_t root = command_->pid();
  // Registered before it execs: nothing the command does is missed.
  if (absl::Status s = parts.recording.bpf().Track(root); !s.ok()) return s;
  parts.recording.AddRoot(root, options_.command[0]);
  start_ns_ = MonotonicNowNs();
  if (absl::Status s = command_->Release(); !s.ok()) {
    fprintf(stderr, "gpuos-trace: %s\n", std::string(s.message()).c_str());
  }
  return absl::OkStatus();
}

void LaunchedJob::OnSignal(const signalfd_siginfo& info) {
  if (info.ssi_signo == SIGCHLD) return;  // reaped in Ended()
  if (ShouldForwardSignal(info.ssi_code)) command_->Forward(static_cast<int>(info.ssi_signo));
}

bool LaunchedJob::Ended(const SessionParts&, uint64_t, bool) { return command_->ReapChildren(); }

void LaunchedJob::Stop(SessionParts&) { end_ns_ = MonotonicNowNs(); }

void LaunchedJob::FillTrailer(const Recording&, v1::TraceTrailer* trailer) const {
  if (command_->wait_status()) {
    trailer->set_root_exited(true);
    trailer->set_root_wait_status(*command_->wait_status());
  }
}

void LaunchedJob::PrintEnd(const Recording& recording, uint64_t events_written) const {
  fprintf(stderr,
          "gpuos-trace: %s exited with %d after %.3f s; recorded %llu events from %zu "
          "processes, %zu threads\n",
          Basename(options_.command[0]).c_str(), command_->exit_code(), (end_ns_ - start_ns_) / 1e9,
          static_cast<unsigned long long>(events_written), recording.processes_seen(),
          recording.threads_seen());
}

int LaunchedJob::ExitCode(const absl::Status&) const { return command_->exit_code(); }

}  // namespace gpuos
