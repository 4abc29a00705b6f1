// Which processes the recording of a running job (running_job.h) covers, read from /proc: the
// processes named with --pid (or found by --gpu-procs), checked to be
// traceable, and every process that descends from them, with their threads
// and names, so the trace lists what was already running at attach time.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuos {

struct ExistingThread {
  pid_t tid = 0;
  std::string comm;
};

struct ExistingProcess {
  pid_t pid = 0;
  pid_t ppid = 0;
  uid_t uid = 0;
  std::string comm;
  std::vector<ExistingThread> threads;
};

// OK when `pid` is a user process other than gpuos-trace itself; otherwise
// a one-line error naming the pid and the reason (no such process, kernel
// thread, gpuos-trace's own pid).
absl::Status CheckAttachTarget(pid_t pid);

// `roots` and every process descending from them now, excluding gpuos-trace
// and its own descendants (it may itself run under a traced shell).
std::set<pid_t> DescendantsOf(const std::set<pid_t>& roots);

// The process's parent, owner, name and threads; NotFound when it is gone.
absl::StatusOr<ExistingProcess> ReadExistingProcess(pid_t pid);

// Processes that hold a GPU context now: an open /dev/nvidiaN (or
// /dev/nvidia-uvm) file, or the CUDA driver library mapped.  Sorted.
std::vector<pid_t> FindGpuProcesses();

// The process's command line, for the trace header (empty when unreadable).
std::vector<std::string> ReadCommandLine(pid_t pid);

}  // namespace gpuos
