// What the root-only runtime tests share: running the real gpuos-trace (and
// other programs) with a timeout and captured output, temporary
// directories, reading a recorded trace event by event, the JSON report
// parsed, and parsing the report file of tests/workloads/ground_truth.cc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "gpuos_trace.pb.h"

namespace gpuos::rt {

// Recording needs root (eBPF); tests that record skip without it.
#define GPUOS_REQUIRE_ROOT()                                           \
  do {                                                                 \
    if (!::gpuos::rt::IsRoot()) GTEST_SKIP() << "needs root (eBPF)"; \
  } while (0)

bool IsRoot();

// The gpuos-trace binary under test and the programs of tests/workloads/.
std::string TracerPath();
std::string WorkloadPath(const std::string& name);

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Lets an unprivileged command write here too (mode 0777).
  void MakeWorldWritable() const;

 private:
  std::string path_;
};

struct RunOptions {
  // "NAME=value" entries added to (or replacing in) this process's
  // environment; a bare "NAME" removes that variable.
  std::vector<std::string> env;
  // Run as this user and group (no supplementary groups); needs root.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  double timeout_s = 60;
};

struct RunResult {
  int wait_status = 0;
  // Like a shell's $?: the exit code, or 128 + the signal that killed it.
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string out;
  std::string err;

  // stderr as lines, without empty ones.
  std::vector<std::string> ErrLines() const;
  // gpuos-trace's error lines: stderr without "gpuos-trace: warning:" lines
  // (a missing CUDA shim is warned about even with -q, and is no error).
  std::vector<std::string> ErrorLines() const;
  // For failure messages.
  std::string Describe() const;
};

// A program started in its own process group, stdin from /dev/null,
// stdout and stderr into files.  The destructor SIGKILLs the group if it is
// still running.
class Child {
 public:
  static Child Start(const std::vector<std::string>& argv, const RunOptions& options = {});
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Waits for the program to end; after timeout_s SIGKILLs its process
  // group and reports timed_out.
  RunResult Wait(double timeout_s);
  void Signal(int signo) const;

 private:
  Child() = default;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_path_;
  std::string err_path_;
  double started_s_ = 0;
};

RunResult Run(const std::vector<std::string>& argv, const RunOptions& options = {});

// Polls `condition` every poll_ms until it holds or timeout_s passes.
bool WaitUntil(const std::function<bool()>& condition, double timeout_s, int poll_ms = 10);
// waitpid() with a timeout (WNOHANG polling); nullopt on timeout.
std::optional<int> WaitForPid(pid_t pid, double timeout_s);
double MonotonicSeconds();

std::optional<std::string> ReadFile(const std::string& path);
bool WriteFile(const std::string& path, const std::string& data);
// The children of every thread of `pid` (/proc/PID/task/*/children).
std::vector<pid_t> ChildrenOf(pid_t pid);
// /proc/PID/comm without the newline; empty when the process is gone.
std::string CommOf(pid_t pid);

// One line of ground_truth's report file ("key=value key=value ...").
struct GroundTruthLine {
  std::map<std::string, std::string> fields;
  std::string raw;
  int64_t Int(const std::string& key) const;  // -1 when absent
  std::string Str(const std::string& key) const;
};
std::vector<GroundTruthLine> ReadGroundTruthReport(const std::string& path);

// Every record of a trace, in file order.  status is the reader's final
// status: OK after a clean end.
struct TraceContents {
  v1::TraceHeader header;
  std::vector<v1::Event> events;
  bool has_trailer = false;
  v1::TraceTrailer trailer;
  absl::Status status;
};
absl::StatusOr<TraceContents> ReadTrace(const std::string& path);

// `gpuos-trace report --format json TRACE`, run and parsed into a protobuf
// Struct (the repository's C++ has no other JSON reader; numbers read as
// doubles).  An error when the report does not exit 0 (with its exit and
// stderr) or its output is not JSON.
absl::StatusOr<google::protobuf::Struct> JsonReport(const std::string& trace, double timeout_s = 120);
using JsonFields = google::protobuf::Map<std::string, google::protobuf::Value>;

// The latest cumulative kernel totals per (tid, syscall nr).
std::map<std::pair<uint32_t, int32_t>, v1::SyscallStats> LatestSyscallStats(
    const TraceContents& trace);

// Start offsets of the frames of a .gpuos file's bytes (record_framing.h),
// found by walking the length fields; stops at the first frame that does
// not fit.
std::vector<uint64_t> FrameOffsets(const std::string& bytes);
// Where the complete frames end: the file's size for an intact file.
uint64_t CompleteFramesEnd(const std::string& bytes);

}  // namespace gpuos::rt
