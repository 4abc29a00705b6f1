// Reading a running job's processes from /proc; see running_job_processes.h.
#include "record/running_job_processes.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "record/mapped_library.h"

namespace gpuos {
namespace {

constexpr unsigned kPfKthread = 0x00200000;  // include/linux/sched.h

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

struct StatFields {
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
  unsigned flags = 0;
};

// /proc/PID/stat: the name may hold spaces and parentheses, so the fields
// are counted from the last ')'.
bool ReadStat(pid_t pid, StatFields* out) {
  std::string text;
  if (!ReadFile(absl::StrFormat("/proc/%d/stat", pid), &text)) return false;
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  out->comm = text.substr(open + 1, close - open - 1);
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is the state (field 3 of stat(5)), fields[1] the ppid,
  // fields[6] the flags (field 9).
  if (fields.size() < 7) return false;
  out->state = fields[0].empty() ? '?' : fields[0][0];
  int ppid = 0;
  unsigned flags = 0;
  if (!absl::SimpleAtoi(fields[1], &ppid) || !absl::SimpleAtoi(fields[6], &flags)) return false;
  out->ppid = ppid;
  out->flags = flags;
  return true;
}

std::vector<pid_t> NumericEntries(const std::string& dir) {
  std::vector<pid_t> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int n = 0;
    if (absl::SimpleAtoi(e->d_name, &n) && n > 0) out.push_back(n);
  }
  closedir(d);
  return out;
}

std::string TrimNewline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

absl::Status CheckAttachTarget(pid_t pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrFormat("--pid %d: not a process id", pid));
  if (pid == getpid()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--pid %d: that is gpuos-trace itself; name the training job's pid", pid));
  }
  StatFields stat;
  if (!ReadStat(pid, &stat)) {
    return absl::NotFoundError(absl::StrFormat("--pid %d: no such process", pid));
  }
  if ((stat.flags & kPfKthread) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--pid %d: '%s' is a kernel thread; only user processes can be traced", pid, stat.comm));
  }
  if (stat.state == 'Z' || stat.state == 'X') {
    return absl::FailedPreconditionError(
        absl::StrFormat("--pid %d: '%s' has exited (zombie)", pid, stat.comm));
  }
  return absl::OkStatus();
}

std::set<pid_t> DescendantsOf(const std::set<pid_t>& roots) {
  std::multimap<pid_t, pid_t> children;
  for (pid_t pid : NumericEntries("/proc")) {
    StatFields stat;
    if (ReadStat(pid, &stat)) children.emplace(stat.ppid, pid);
  }
  const pid_t self = getpid();
  std::set<pid_t> found;
  std::vector<pid_t> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    pid_t pid = stack.back();
    stack.pop_back();
    // gpuos-trace and whatever it started (its injection helper) stay out.
    if (pid == self || !found.insert(pid).second) continue;
    auto range = children.equal_range(pid);
    for (auto it = range.first; it != range.second; ++it) stack.push_back(it->second);
  }
  return found;
}

absl::StatusOr<ExistingProcess> ReadExistingProcess(pid_t pid) {
  StatFields stat;
  if (!ReadStat(pid, &stat)) return absl::NotFoundError(absl::StrFormat("pid %d is gone", pid));
  ExistingProcess process;
  process.pid = pid;
  process.ppid = stat.ppid;
  process.comm = stat.comm;
  std::string status;
  if (ReadFile(absl::StrFormat("/proc/%d/status", pid), &status)) {
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      if (!absl::StartsWith(line, "Uid:")) continue;
      std::vector<std::string> ids = absl::StrSplit(line.substr(4), absl::ByAnyChar(" \t"),
                                                    absl::SkipEmpty());
      unsigned uid = 0;
      if (ids.size() > 1 && absl::SimpleAtoi(ids[1], &uid)) process.uid = uid;  // effective
    }
  }
  for (pid_t tid : NumericEntries(absl::StrFormat("/proc/%d/task", pid))) {
    std::string comm;
    ReadFile(absl::StrFormat("/proc/%d/task/%d/comm", pid, tid), &comm);
    process.threads.push_back({tid, TrimNewline(comm)});
  }
  return process;
}

std::vector<pid_t> FindGpuProcesses() {
  std::vector<pid_t> out;
  const pid_t self = getpid();
  for (pid_t pid : NumericEntries("/proc")) {
    if (pid == self) continue;
    bool gpu = false;
    std::string fd_dir = absl::StrFormat("/proc/%d/fd", pid);
    for (pid_t fd : NumericEntries(fd_dir)) {
      char target[256];
      ssize_t n = readlink(absl::StrFormat("%s/%d", fd_dir, fd).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = 0;
      absl::string_view t(target);
      // /dev/nvidia0, /dev/nvidia1, ...: a device opened for a context
      // (/dev/nvidiactl alone is also held by tools like nvidia-smi).
      if (absl::ConsumePrefix(&t, "/dev/nvidia") && !t.empty() &&
          std::all_of(t.begin(), t.end(), [](char c) { return isdigit(static_cast<unsigned char>(c)); })) {
        gpu = true;
        break;
      }
    }
    if (!gpu) gpu = !FindMappedLibrary(pid, "libcuda.so").empty();
    if (gpu) out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ReadCommandLine(pid_t pid) {
  std::string text;
  std::vector<std::string> out;
  if (!ReadFile(absl::StrFormat("/proc/%d/cmdline", pid), &text)) return out;
  for (absl::string_view arg : absl::StrSplit(text, '\0')) out.emplace_back(arg);
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

}  // namespace gpuos
