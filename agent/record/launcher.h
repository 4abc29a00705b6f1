// Starts the traced command so that nothing it does is missed, and follows
// it to the end:
//  - Prepare() forks a child that stops before execve and waits until the
//    tracer has registered its pid with the BPF programs; Release() lets it
//    go on to drop privileges and exec.  An exec failure comes back to the
//    parent through a close-on-exec pipe (the child then exits 127).
//  - Under sudo the command runs as the invoking user (SUDO_UID, SUDO_GID and
//    that user's supplementary groups; HOME, USER, LOGNAME set to that user),
//    unless run_as_root.
//  - The tracer becomes a child subreaper, so orphaned descendants (daemonized
//    workers) are re-parented to it and the whole tree is waited for.
//  - The child is never tied to the tracer's life: no PR_SET_PDEATHSIG, no
//    pipe it could block on, so killing the tracer (even SIGKILL) leaves the
//    command running.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuos {

// Who the traced command runs as.
struct RunAs {
  bool drop_privileges = false;  // false: keep the tracer's own identity
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user_name;  // empty when the uid has no passwd entry
  std::string home;
};

// Reads SUDO_UID/SUDO_GID (when running as root under sudo).  With
// run_as_root, or when not under sudo, returns drop_privileges = false.
// Malformed SUDO_UID/SUDO_GID is an error.
absl::StatusOr<RunAs> ResolveRunAs(bool run_as_root);

struct LaunchOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  RunAs run_as;
  // Extra environment for the command, "NAME=value" (LD_PRELOAD later).
  std::vector<std::string> extra_env;
};

class LaunchedCommand {
 public:
  // Forks the child, which waits for Release().  Makes the calling process
  // a child subreaper.
  static absl::StatusOr<std::unique_ptr<LaunchedCommand>> Prepare(const LaunchOptions& options);
  ~LaunchedCommand();

  pid_t pid() const { return pid_; }

  // Lets the child drop privileges and exec.  Returns once the exec has
  // succeeded or failed; on failure the message says why, in one line
  // ("cannot run 'foo': No such file or directory"), and exit_code() will
  // be 127.
  absl::Status Release();

  // Reaps every exited child of this process (the command and re-parented
  // descendants) without blocking.  Returns true when no child is left.
  bool ReapChildren();

  // The command's wait(2) status, once it has been reaped.
  std::optional<int> wait_status() const { return wait_status_; }

  // What gpuos-trace exits with: the command's exit code, 128 + signal
  // when it was killed, 127 when it could not be run.
  int exit_code() const;

  // Sends `signo` to the command (not to the rest of the tree, which gets
  // terminal signals from the kernel like any process group member).
  void Forward(int signo);

 private:
  LaunchedCommand() = default;
  pid_t pid_ = -1;
  int release_fd_ = -1;   // parent writes one byte to let the child go
  int exec_err_fd_ = -1;  // child writes errno here if execve fails
  bool exec_failed_ = false;
  std::optional<int> wait_status_;
};

// Blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD and returns a signalfd that
// reports them, so the main loop can poll it next to the ring buffer.
// `also`: more signals to take the same way (SIGUSR1 for the flight
// recorder's dump).
absl::StatusOr<int> OpenSignalFd(std::initializer_list<int> also = {});

// Whether a signal read from the signalfd should be forwarded to the command:
// signals sent by another process (kill(1), a scheduler) are; ones the
// terminal raised for the whole foreground process group (Ctrl-C) already
// reached the command and are not sent twice.
bool ShouldForwardSignal(int si_code);

}  // namespace gpuos
