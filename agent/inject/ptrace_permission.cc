// Explaining a refused ptrace attach; see ptrace_permission.h.
#include "inject/ptrace_permission.h"

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "inject/remote_process.h"

namespace gpuos::inject {
namespace {

constexpr int kCapSysPtrace = 19;

bool HaveCapSysPtrace() {
  auto caps = StatusField(getpid(), getpid(), "CapEff");
  uint64_t bits = 0;
  return caps && absl::SimpleHexAtoi(*caps, &bits) && (bits >> kCapSysPtrace & 1) != 0;
}

// The effective uid of a thread ("Uid:\treal\teffective\tsaved\tfs").
int64_t EffectiveUid(pid_t pid, pid_t tid) {
  auto uids = StatusField(pid, tid, "Uid");
  if (!uids) return -1;
  std::vector<std::string> fields = absl::StrSplit(*uids, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  int64_t uid = -1;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &uid)) return -1;
  return uid;
}

}  // namespace

std::string TracerOf(pid_t pid, pid_t tid) {
  auto tracer = StatusField(pid, tid, "TracerPid");
  int tracer_pid = 0;
  if (!tracer || !absl::SimpleAtoi(*tracer, &tracer_pid) || tracer_pid == 0) return "";
  auto comm = ReadSmallFile(absl::StrFormat("/proc/%d/comm", tracer_pid));
  return absl::StrFormat("pid %d (%s)", tracer_pid,
                         comm ? std::string(absl::StripAsciiWhitespace(*comm)) : "?");
}

std::string DescribePtraceDenied(pid_t pid, pid_t tid) {
  if (std::string tracer = TracerOf(pid, tid); !tracer.empty()) {
    return absl::StrFormat("pid %d is already traced by %s (a debugger or another tracer)", pid,
                           tracer);
  }
  int scope = -1;
  if (auto text = ReadSmallFile("/proc/sys/kernel/yama/ptrace_scope")) {
    absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &scope);
  }
  const bool cap = HaveCapSysPtrace();
  if (scope == 3) {
    return "ptrace is disabled on this machine (kernel.yama.ptrace_scope=3, which only a reboot "
           "lowers)";
  }
  if (!cap && scope == 2) {
    return "not permitted: kernel.yama.ptrace_scope=2 allows ptrace only with CAP_SYS_PTRACE; run "
           "gpuos-trace as root";
  }
  const int64_t target_uid = EffectiveUid(pid, tid);
  const int64_t our_uid = static_cast<int64_t>(geteuid());
  if (!cap && target_uid >= 0 && target_uid != our_uid) {
    return absl::StrFormat(
        "not permitted: pid %d runs as uid %d and gpuos-trace as uid %d without CAP_SYS_PTRACE; run "
        "gpuos-trace as root",
        pid, target_uid, our_uid);
  }
  if (!cap && scope == 1) {
    return "not permitted: kernel.yama.ptrace_scope=1 allows ptrace of non-descendants only with "
           "CAP_SYS_PTRACE; run gpuos-trace as root (or sysctl kernel.yama.ptrace_scope=0)";
  }
  if (!cap) {
    return absl::StrFormat(
        "not permitted to ptrace pid %d without CAP_SYS_PTRACE (it may have made itself "
        "undumpable); run gpuos-trace as root",
        pid);
  }
  return absl::StrFormat(
      "not permitted to ptrace pid %d even with CAP_SYS_PTRACE: a security module (SELinux, "
      "AppArmor) or a user namespace the process is in forbids it",
      pid);
}

}  // namespace gpuos::inject
