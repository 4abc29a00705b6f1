// Starts the traced command held before execve, lets it go once the tracer
// is ready, and follows the whole process tree to its end (see launcher.h).
//
// Between fork() and execve() the child may only make async-signal-safe
// calls: the tracer has threads (ring buffer, shim socket) and any of them
// may have held the malloc or NSS locks at the moment of the fork.  So
// everything the child needs (argv, the environment, the group list) is
// built before fork() and the child only makes raw system calls.
#include "record/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/fd_write.h"

extern char** environ;

namespace gpuos {
namespace {

// Where the child was when it gave up; sent to the parent with errno.
enum ChildStage : int32_t {
  kStageSetgroups = 1,
  kStageSetgid = 2,
  kStageSetuid = 3,
  kStageVerifyIds = 4,
  kStageExec = 5,
};

// What the child writes to the exec-error pipe, followed by argv[0]'s
// bytes, so the parent can name the command without keeping a copy.
struct ChildError {
  int32_t stage;
  int32_t err;
  uint32_t argv0_len;
};

const char* StageName(int32_t stage) {
  switch (stage) {
    case kStageSetgroups: return "setting the supplementary groups";
    case kStageSetgid: return "setting the group id";
    case kStageSetuid: return "setting the user id";
    case kStageVerifyIds: return "checking that root privileges were dropped";
    default: return nullptr;
  }
}

// Everything the child uses after fork(), built beforehand because building
// it would allocate.  The pointers point into `storage`.
struct ChildPlan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  bool drop_privileges = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// The tracer's environment with `overrides` ("NAME=value") replacing or
// adding variables of the same name.
std::vector<std::string> BuildEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& entry : overrides) {
    const size_t eq = entry.find('=');
    const absl::string_view name = absl::string_view(entry).substr(0, eq);
    auto same_name = [&](const std::string& existing) {
      const size_t existing_eq = existing.find('=');
      return absl::string_view(existing).substr(0, existing_eq) == name;
    };
    env.erase(std::remove_if(env.begin(), env.end(), same_name), env.end());
    env.push_back(entry);
  }
  return env;
}

// The groups `run_as` belongs to, looked up through NSS now, in the parent,
// because initgroups() in the child would not be async-signal-safe.
absl::StatusOr<std::vector<gid_t>> SupplementaryGroups(const RunAs& run_as) {
  if (run_as.user_name.empty()) return std::vector<gid_t>{run_as.gid};
  int count = 32;
  std::vector<gid_t> groups;
  for (int attempt = 0; attempt < 8; ++attempt) {
    groups.resize(count);
    int n = count;
    if (getgrouplist(run_as.user_name.c_str(), run_as.gid, groups.data(), &n) >= 0) {
      groups.resize(n);
      return groups;
    }
    count = std::max(n, count * 2);  // n is the size needed (glibc)
  }
  return absl::InternalError(
      absl::StrFormat("cannot list the groups of user '%s'", run_as.user_name));
}

absl::StatusOr<ChildPlan> BuildPlan(const LaunchOptions& options) {
  ChildPlan plan;
  plan.argv_storage = options.argv;
  std::vector<std::string> overrides;
  if (options.run_as.drop_privileges) {
    plan.drop_privileges = true;
    plan.uid = options.run_as.uid;
    plan.gid = options.run_as.gid;
    absl::StatusOr<std::vector<gid_t>> groups = SupplementaryGroups(options.run_as);
    if (!groups.ok()) return groups.status();
    plan.groups = *std::move(groups);
    if (!options.run_as.home.empty()) overrides.push_back("HOME=" + options.run_as.home);
    if (!options.run_as.user_name.empty()) {
      overrides.push_back("USER=" + options.run_as.user_name);
      overrides.push_back("LOGNAME=" + options.run_as.user_name);
    }
  }
  // extra_env comes last so the caller's choice wins over the defaults.
  overrides.insert(overrides.end(), options.extra_env.begin(), options.extra_env.end());
  plan.env_storage = BuildEnvironment(overrides);
  for (std::string& arg : plan.argv_storage) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (std::string& entry : plan.env_storage) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  return plan;
}

// Async-signal-safe write of the whole buffer.
[[noreturn]] void ChildFail(int err_fd, int32_t stage, int err, const char* argv0) {
  ChildError record{stage, err, static_cast<uint32_t>(strlen(argv0))};
  WriteAll(err_fd, &record, sizeof(record));
  WriteAll(err_fd, argv0, record.argv0_len);
  _exit(127);
}

// Runs in the forked child; async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& plan, int release_fd, int err_fd) {
  // The tracer's handlers mean nothing here and its blocked signals are the
  // ones its signalfd reads; the command starts with the defaults, as it
  // would from a shell.  Dispositions first: a signal unblocked while the
  // tracer's handler is still installed would run that handler here.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    sigaction(sig, &dfl, nullptr);  // fails harmlessly for glibc's reserved signals
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Wait for the tracer.  EOF without the byte means the tracer went away
  // (crashed, killed, gave up on setup) before it was ready: running the
  // command untraced would silently give the user a run without a trace, and
  // nobody is left to report its result, so exit without a word instead.
  char go = 0;
  ssize_t n;
  do {
    n = read(release_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);
  close(release_fd);

  const char* argv0 = plan.argv[0];
  if (plan.drop_privileges) {
    if (setgroups(plan.groups.size(), plan.groups.data()) != 0)
      ChildFail(err_fd, kStageSetgroups, errno, argv0);
    if (setresgid(plan.gid, plan.gid, plan.gid) != 0) ChildFail(err_fd, kStageSetgid, errno, argv0);
    if (setresuid(plan.uid, plan.uid, plan.uid) != 0) ChildFail(err_fd, kStageSetuid, errno, argv0);
    // Running a user's job as root by accident is worse than not running it.
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
        ruid != plan.uid || euid != plan.uid || suid != plan.uid || rgid != plan.gid ||
        egid != plan.gid || sgid != plan.gid) {
      ChildFail(err_fd, kStageVerifyIds, EPERM, argv0);
    }
  }
  // glibc's execvpe searches PATH with stack buffers only (no malloc), and
  // looks argv[0] up in the tracer's PATH.
  execvpe(argv0, plan.argv.data(), plan.envp.data());
  ChildFail(err_fd, kStageExec, errno, argv0);
}

// The file execvpe would have found for `argv0`, or "" when there is none.
// Seen from the tracer (root, usually), which is what the user means: a
// name missing everywhere must not read "Permission denied" just because
// some PATH directory (root's own, say) is closed to the command's user.
std::string FindCommand(const std::string& argv0) {
  struct stat st;
  if (argv0.find('/') != std::string::npos) return stat(argv0.c_str(), &st) == 0 ? argv0 : "";
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/bin:/usr/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", argv0);
    if (stat(candidate.c_str(), &st) == 0) return candidate;
  }
  return "";
}

// strerror() plus a hint where the bare errno would leave the user guessing.
std::string ExecErrorText(const std::string& argv0, int err) {
  const std::string found = FindCommand(argv0);
  if (found.empty() && (err == ENOENT || err == EACCES)) return strerror(ENOENT);
  std::string text = strerror(err);
  struct stat st;
  if (found.empty() || stat(found.c_str(), &st) != 0) return text;
  if (err == EACCES && S_ISDIR(st.st_mode)) return strerror(EISDIR);
  if (err == EACCES && S_ISREG(st.st_mode) && (st.st_mode & 0111) == 0)
    return text + " (the file is not executable)";
  if (err == ENOENT)  // the file is there, so its interpreter or loader is not
    return text + " (its interpreter or dynamic loader is missing)";
  return text;
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Strict decimal id: digits only, no sign or spaces, and not (id_t)-1,
// which the set*id calls read as "leave unchanged".
bool ParseId(absl::string_view text, uint32_t* id) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(text, id) && *id != UINT32_MAX;
}

}  // namespace

absl::StatusOr<RunAs> ResolveRunAs(bool run_as_root) {
  RunAs run_as;
  if (run_as_root || geteuid() != 0) return run_as;
  const char* sudo_uid = getenv("SUDO_UID");
  if (sudo_uid == nullptr) return run_as;
  uint32_t uid = 0;
  if (!ParseId(sudo_uid, &uid)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SUDO_UID='%s' is not a user id; unset it, or run the command as root", sudo_uid));
  }
  if (uid == 0) return run_as;  // sudo from root: there is nothing to drop

  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  int rc;
  while ((rc = getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (1u << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  run_as.drop_privileges = true;
  run_as.uid = uid;
  if (found != nullptr) {
    run_as.user_name = pw.pw_name;
    run_as.home = pw.pw_dir;
    run_as.gid = pw.pw_gid;
  }
  const char* sudo_gid = getenv("SUDO_GID");
  if (sudo_gid != nullptr) {
    uint32_t gid = 0;
    if (!ParseId(sudo_gid, &gid)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "SUDO_GID='%s' is not a group id; unset it, or run the command as root", sudo_gid));
    }
    run_as.gid = gid;
  } else if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SUDO_GID is not set and user id %u has no passwd entry to take the group from; "
        "set SUDO_GID, or run the command as root",
        uid));
  }
  return run_as;
}

absl::StatusOr<std::unique_ptr<LaunchedCommand>> LaunchedCommand::Prepare(
    const LaunchOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to run");
  absl::StatusOr<ChildPlan> plan = BuildPlan(options);
  if (!plan.ok()) return plan.status();

  // Orphans of the command (daemonized workers) come to us, not to init, so
  // the trace follows them and waits for them.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot become a child subreaper: ", strerror(errno)));
  }

  // The release channel is a socket rather than a pipe so that the parent can
  // send with MSG_NOSIGNAL: if the child died before release (Ctrl-C during
  // setup kills it, it is in our process group), a pipe write would raise
  // SIGPIPE in the tracer.
  int release[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, release) != 0) {
    return absl::InternalError(absl::StrCat("cannot create the release socket: ", strerror(errno)));
  }
  int exec_err[2];
  if (pipe2(exec_err, O_CLOEXEC) != 0) {
    const int err = errno;
    close(release[0]);
    close(release[1]);
    return absl::InternalError(absl::StrCat("cannot create the exec-error pipe: ", strerror(err)));
  }

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {release[0], release[1], exec_err[0], exec_err[1]}) close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start '", options.argv[0], "': fork failed: ", strerror(err)));
  }
  if (pid == 0) {
    // Keeping the parent's end open here would hide the tracer's death.
    close(release[1]);
    close(exec_err[0]);
    RunChild(*plan, release[0], exec_err[1]);
  }
  close(release[0]);
  close(exec_err[1]);
  std::unique_ptr<LaunchedCommand> command(new LaunchedCommand());
  command->pid_ = pid;
  command->release_fd_ = release[1];
  command->exec_err_fd_ = exec_err[0];
  return command;
}

LaunchedCommand::~LaunchedCommand() {
  if (release_fd_ >= 0 && !wait_status_.has_value()) {
    // Never released: the child has not exec'd anything, so stopping it is
    // safe, and SIGKILL (not just the EOF it would see) also ends a child
    // that a Ctrl-Z stopped, which would otherwise make waitpid hang.
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, __WALL) < 0 && errno == EINTR) {
    }
  } else if (exec_failed_ && !wait_status_.has_value()) {
    // The child _exit()s right after reporting; do not leave a zombie.
    while (waitpid(pid_, nullptr, __WALL) < 0 && errno == EINTR) {
    }
  }
  CloseIfOpen(release_fd_);
  CloseIfOpen(exec_err_fd_);
}

absl::Status LaunchedCommand::Release() {
  if (release_fd_ < 0) return absl::FailedPreconditionError("the command was already released");
  const char go = 'g';
  ssize_t sent;
  do {
    sent = send(release_fd_, &go, 1, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  const int send_err = errno;
  CloseIfOpen(release_fd_);
  if (sent != 1) {
    CloseIfOpen(exec_err_fd_);
    // Its wait status (a signal, usually) says what happened to it.
    return absl::AbortedError(absl::StrFormat(
        "the command ended before it could start (%s)", strerror(send_err)));
  }

  // EOF alone: execve succeeded and close-on-exec closed the pipe.
  std::string report;
  char buf[512];
  for (;;) {
    const ssize_t n = read(exec_err_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  CloseIfOpen(exec_err_fd_);
  if (report.empty()) return absl::OkStatus();

  exec_failed_ = true;
  ChildError record{};
  if (report.size() < sizeof(record)) {
    return absl::InternalError("the command could not be run (truncated error report)");
  }
  memcpy(&record, report.data(), sizeof(record));
  const std::string argv0 = report.substr(sizeof(record), record.argv0_len);
  if (record.stage == kStageExec) {
    return absl::NotFoundError(
        absl::StrFormat("cannot run '%s': %s", argv0, ExecErrorText(argv0, record.err)));
  }
  const char* stage = StageName(record.stage);
  return absl::PermissionDeniedError(absl::StrFormat("cannot run '%s': %s failed: %s", argv0,
                                                     stage != nullptr ? stage : "setup",
                                                     strerror(record.err)));
}

bool LaunchedCommand::ReapChildren() {
  for (;;) {
    int status = 0;
    // __WALL: without it a child whose exit signal is not SIGCHLD (clone()d
    // by the tracer itself) is invisible and we would answer "none left".
    // Re-parented orphans always get SIGCHLD from the kernel.
    const pid_t pid = waitpid(-1, &status, WNOHANG | __WALL);
    if (pid > 0) {
      if (pid == pid_ && !wait_status_.has_value()) wait_status_ = status;
      continue;
    }
    if (pid == 0) return false;  // children left, none exited yet
    if (errno == EINTR) continue;
    return errno == ECHILD;
  }
}

int LaunchedCommand::exit_code() const {
  if (exec_failed_) return 127;
  if (!wait_status_.has_value()) return 1;  // not ended yet: no code of its own to pass on
  const int status = *wait_status_;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void LaunchedCommand::Forward(int signo) {
  // Once reaped, pid_ may already belong to someone else.
  if (pid_ > 0 && !wait_status_.has_value()) kill(pid_, signo);
}

absl::StatusOr<int> OpenSignalFd(std::initializer_list<int> also) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  for (int sig : also) sigaddset(&mask, sig);
  // Threads started afterwards inherit the mask, so call this before them;
  // a thread that leaves these unblocked would take them from the signalfd.
  if (const int err = pthread_sigmask(SIG_BLOCK, &mask, nullptr); err != 0) {
    return absl::InternalError(absl::StrCat("cannot block signals: ", strerror(err)));
  }
  const int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open a signalfd: ", strerror(errno)));
  return fd;
}

bool ShouldForwardSignal(int si_code) {
  // A terminal's Ctrl-C, Ctrl-\ or hangup goes to the whole foreground
  // process group with SI_KERNEL, so the command got its own copy already.
  return si_code == SI_USER || si_code == SI_QUEUE || si_code == SI_TKILL;
}

}  // namespace gpuos
