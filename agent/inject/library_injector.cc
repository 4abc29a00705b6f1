// InjectLibrary: checks that explain a refusal before anything is touched,
// the plan (library path, dlopen & co. in the target, vector state size),
// then the guardian; see library_injector.h.
#include "inject/library_injector.h"

#if defined(__x86_64__) && defined(__linux__)

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/elf_symbols.h"
#include "inject/injection_debug.h"
#include "inject/injection_guardian.h"
#include "inject/injection_stub.h"
#include "inject/injection_transaction.h"
#include "inject/ptrace_permission.h"
#include "inject/remote_process.h"
#include "inject/target_library_path.h"
#include "inject/target_loader.h"

namespace gpuos {
namespace {

using inject::ListThreads;
using inject::StatusField;
using inject::ThreadState;

constexpr uint64_t kPfKthread = 0x00200000;

std::string Comm(pid_t pid) {
  auto comm = inject::ReadSmallFile(absl::StrFormat("/proc/%d/comm", pid));
  return comm ? std::string(absl::StripAsciiWhitespace(*comm)) : "?";
}

absl::Status CheckTarget(pid_t pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrFormat("invalid pid %d", pid));
  if (pid == getpid()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pid %d is this process itself; it cannot inject into itself", pid));
  }
  auto flags = inject::ProcessFlags(pid);
  if (!flags) return absl::NotFoundError(absl::StrFormat("no process with pid %d", pid));
  if (*flags & kPfKthread) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pid %d (%s) is a kernel thread; only user processes can load libraries", pid, Comm(pid)));
  }
  int tgid = 0;
  if (auto field = StatusField(pid, pid, "Tgid"); field && absl::SimpleAtoi(*field, &tgid)) {
    if (tgid == getpid()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("pid %d is a thread of this process; it cannot inject into itself", pid));
    }
    if (tgid != pid) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%d is a thread of process %d; pass the process id", pid, tgid));
    }
  }
  bool alive = false;
  for (pid_t tid : ListThreads(pid)) {
    const char state = ThreadState(pid, tid);
    if (state == 'T') {
      return absl::FailedPreconditionError(absl::StrFormat(
          "pid %d (%s) is stopped (SIGSTOP or Ctrl-Z); continue it first", pid, Comm(pid)));
    }
    if (std::string tracer = inject::TracerOf(pid, tid); !tracer.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "pid %d (%s) is already traced by %s; detach that debugger or tracer first", pid,
          Comm(pid), tracer));
    }
    if (state != 0 && state != 'Z' && state != 'X') alive = true;
  }
  if (!alive) return absl::NotFoundError(absl::StrFormat("pid %d has exited", pid));
  // /proc/PID/maps needs the same permission as a ptrace attach (nearly):
  // refuse now, with the reason, rather than on the first read.
  if (int fd = open(absl::StrFormat("/proc/%d/maps", pid).c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    close(fd);
  } else if (errno == EACCES || errno == EPERM) {
    return absl::PermissionDeniedError(inject::DescribePtraceDenied(pid, pid));
  }
  if (auto seccomp = StatusField(pid, pid, "Seccomp"); seccomp && *seccomp == "1") {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pid %d runs in strict seccomp mode, where mmap would kill it", pid));
  }
  // A 32-bit program (its registers are checked again once stopped).
  if (int fd = open(absl::StrFormat("/proc/%d/exe", pid).c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    unsigned char ident[EI_NIDENT] = {};
    const bool read_ok = pread(fd, ident, sizeof(ident), 0) == static_cast<ssize_t>(sizeof(ident));
    close(fd);
    if (read_ok && memcmp(ident, ELFMAG, SELFMAG) == 0 && ident[EI_CLASS] != ELFCLASS64) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "pid %d (%s) is a 32-bit program; only 64-bit processes are supported", pid, Comm(pid)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLibrary(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrFormat("library path \"%s\" is not absolute", path));
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrFormat("library %s does not exist", path));
    }
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot read library %s: %s", path, strerror(err)));
  }
  absl::Status status = CheckLoadableLibrary(fd, path);
  close(fd);
  return status;
}

}  // namespace

absl::StatusOr<InjectionReport> InjectLibrary(const InjectionRequest& request) {
  if (request.entry_symbol.empty()) {
    return absl::InvalidArgumentError("no entry symbol to call after loading the library");
  }
  if (request.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the injection timeout must be positive");
  }
  inject::InjectionDebugLog("checking the target");
  if (absl::Status s = CheckTarget(request.pid); !s.ok()) return s;
  if (absl::Status s = CheckLibrary(request.library_path); !s.ok()) return s;

  inject::InjectionPlan plan;
  plan.pid = request.pid;
  auto path_in_target = inject::LibraryPathInTarget(request.pid, request.library_path);
  if (!path_in_target.ok()) return path_in_target.status();
  plan.library_path_in_target = *path_in_target;
  plan.entry_symbol = request.entry_symbol;
  plan.argument = request.entry_argument;
  plan.timeout_ns = absl::ToInt64Nanoseconds(request.timeout);
  auto loader = inject::FindTargetLoader(request.pid);
  if (!loader.ok()) return loader.status();
  plan.loader = std::move(*loader);
  plan.cpu_state = inject::ProbeCpuStateSave();
  if (const char* pause = getenv("GPUOS_INJECT_TEST_PAUSE")) plan.pause_phase = pause;
  // Fail on a too long path or argument here, not in the guardian.
  inject::StubParameters check;
  check.library_path = plan.library_path_in_target;
  check.entry_symbol = plan.entry_symbol;
  check.argument = plan.argument;
  if (auto image = inject::BuildStubImage(check); !image.ok()) return image.status();

  inject::InjectionDebugLog("planned; starting the guardian");
  auto result = inject::RunInGuardian(plan);
  inject::InjectionDebugLog("the guardian answered");
  if (!result.ok()) return result.status();
  InjectionReport report;
  report.hijacked_tid = result->hijacked_tid;
  report.stopped = absl::Nanoseconds(result->stopped_ns);
  report.until_entry_returned = absl::Nanoseconds(result->until_entry_returned_ns);
  report.library_path_in_target = plan.library_path_in_target;
  return report;
}

}  // namespace gpuos

#else  // not x86_64 Linux

namespace gpuos {

absl::StatusOr<InjectionReport> InjectLibrary(const InjectionRequest& request) {
  return absl::UnimplementedError(
      "injecting a library into a running process is implemented for x86_64 Linux only");
}

}  // namespace gpuos

#endif
