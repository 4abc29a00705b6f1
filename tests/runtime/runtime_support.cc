// Process running, temporary files and trace reading for the runtime tests;
// see runtime_support.h.
#include "runtime_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"

extern char** environ;

namespace gpuos::rt {
namespace {

namespace fs = std::filesystem;

void SleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

std::vector<std::string> BuildEnvironment(const std::vector<std::string>& changes) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& change : changes) {
    const std::string name = change.substr(0, change.find('='));
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& e) { return e.substr(0, e.find('=')) == name; }),
              env.end());
    if (change.find('=') != std::string::npos) env.push_back(change);
  }
  return env;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

bool IsRoot() { return geteuid() == 0; }

std::string TracerPath() { return GPUOS_TRACE_BIN; }

std::string WorkloadPath(const std::string& name) {
  return std::string(GPUOS_WORKLOAD_DIR) + "/" + name;
}

TempDir::TempDir() {
  char templ[] = "/tmp/gpuos-runtime-test.XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    fprintf(stderr, "runtime_support: mkdtemp failed: %s\n", strerror(errno));
    path_ = "/tmp";
    return;
  }
  path_ = templ;
}

TempDir::~TempDir() {
  if (path_ == "/tmp") return;
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

void TempDir::MakeWorldWritable() const { chmod(path_.c_str(), 0777); }

std::vector<std::string> RunResult::ErrLines() const {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
    lines.emplace_back(line);
  }
  return lines;
}

std::vector<std::string> RunResult::ErrorLines() const {
  std::vector<std::string> lines;
  for (std::string& line : ErrLines()) {
    if (line.rfind("gpuos-trace: warning:", 0) != 0) lines.push_back(std::move(line));
  }
  return lines;
}

std::string RunResult::Describe() const {
  return absl::StrCat("exit code ", exit_code, timed_out ? " (TIMED OUT)" : "", " after ",
                      seconds, " s\n--- stdout ---\n", out.substr(0, 4000), "\n--- stderr ---\n",
                      err.substr(0, 4000));
}

Child Child::Start(const std::vector<std::string>& argv, const RunOptions& options) {
  static int sequence = 0;
  Child child;
  const std::string base = absl::StrCat("/tmp/gpuos-runtime-child.", getpid(), ".", ++sequence);
  child.out_path_ = base + ".out";
  child.err_path_ = base + ".err";

  // Everything the child needs is built before fork(): after it, only
  // async-signal-safe calls.
  std::vector<std::string> argv_storage = argv;
  std::vector<std::string> env_storage = BuildEnvironment(options.env);
  std::vector<char*> argv_ptrs, env_ptrs;
  for (std::string& a : argv_storage) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  for (std::string& e : env_storage) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  const int out_fd = open(child.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = open(child.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

  child.started_s_ = MonotonicSeconds();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (options.gid) {
      const gid_t gid = *options.gid;
      if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0) _exit(126);
    }
    if (options.uid) {
      const uid_t uid = *options.uid;
      if (setresuid(uid, uid, uid) != 0) _exit(126);
    }
    execvpe(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
    const char msg[] = "runtime_support: exec failed\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
    }
    _exit(127);
  }
  for (int fd : {out_fd, err_fd, null_fd}) {
    if (fd >= 0) close(fd);
  }
  child.pid_ = pid;
  if (pid > 0) setpgid(pid, pid);  // also here, so Signal() to the group never races the child
  return child;
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_),
      reaped_(other.reaped_),
      out_path_(std::move(other.out_path_)),
      err_path_(std::move(other.err_path_)),
      started_s_(other.started_s_) {
  other.pid_ = -1;
  other.reaped_ = true;
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (!out_path_.empty()) unlink(out_path_.c_str());
  if (!err_path_.empty()) unlink(err_path_.c_str());
}

RunResult Child::Wait(double timeout_s) {
  RunResult result;
  if (pid_ <= 0) {
    result.err = "fork failed";
    return result;
  }
  std::optional<int> status = WaitForPid(pid_, timeout_s);
  if (!status) {
    result.timed_out = true;
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int s = 0;
    while (waitpid(pid_, &s, 0) < 0 && errno == EINTR) {
    }
    status = s;
  }
  reaped_ = true;
  result.seconds = MonotonicSeconds() - started_s_;
  result.wait_status = *status;
  result.exit_code = ExitCodeOf(*status);
  result.out = ReadFile(out_path_).value_or("");
  result.err = ReadFile(err_path_).value_or("");
  return result;
}

void Child::Signal(int signo) const {
  if (pid_ > 0 && !reaped_) kill(pid_, signo);
}

RunResult Run(const std::vector<std::string>& argv, const RunOptions& options) {
  Child child = Child::Start(argv, options);
  return child.Wait(options.timeout_s);
}

double MonotonicSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

bool WaitUntil(const std::function<bool()>& condition, double timeout_s, int poll_ms) {
  const double deadline = MonotonicSeconds() + timeout_s;
  for (;;) {
    if (condition()) return true;
    if (MonotonicSeconds() > deadline) return false;
    SleepMs(poll_ms);
  }
}

std::optional<int> WaitForPid(pid_t pid, double timeout_s) {
  const double deadline = MonotonicSeconds() + timeout_s;
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG | __WALL);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (MonotonicSeconds() > deadline) return std::nullopt;
    SleepMs(5);
  }
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  return static_cast<bool>(out);
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return children;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    auto text = ReadFile(absl::StrCat(task_dir, "/", entry->d_name, "/children"));
    if (!text) continue;
    for (absl::string_view word : absl::StrSplit(*text, ' ', absl::SkipWhitespace())) {
      int child = 0;
      if (absl::SimpleAtoi(word, &child)) children.push_back(child);
    }
  }
  closedir(dir);
  return children;
}

std::string CommOf(pid_t pid) {
  std::string comm = ReadFile(absl::StrCat("/proc/", pid, "/comm")).value_or("");
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

int64_t GroundTruthLine::Int(const std::string& key) const {
  auto it = fields.find(key);
  int64_t value = -1;
  if (it == fields.end() || !absl::SimpleAtoi(it->second, &value)) return -1;
  return value;
}

std::string GroundTruthLine::Str(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? std::string() : it->second;
}

std::vector<GroundTruthLine> ReadGroundTruthReport(const std::string& path) {
  std::vector<GroundTruthLine> lines;
  const std::string text = ReadFile(path).value_or("");
  for (absl::string_view raw : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    GroundTruthLine line;
    line.raw = std::string(raw);
    for (absl::string_view word : absl::StrSplit(raw, ' ', absl::SkipEmpty())) {
      const size_t eq = word.find('=');
      if (eq == absl::string_view::npos) continue;
      line.fields[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

absl::StatusOr<google::protobuf::Struct> JsonReport(const std::string& trace, double timeout_s) {
  RunOptions options;
  options.timeout_s = timeout_s;
  RunResult r = Run({TracerPath(), "report", "--format", "json", trace}, options);
  if (r.exit_code != 0) return absl::InternalError(absl::StrFormat("report failed: %s", r.Describe()));
  google::protobuf::Struct json;
  auto status = google::protobuf::util::JsonStringToMessage(r.out, &json);
  if (!status.ok()) {
    return absl::InternalError(absl::StrFormat("report --format json is not JSON (%s): %s", status.ToString(),
                                               r.out.substr(0, 2000)));
  }
  return json;
}

absl::StatusOr<TraceContents> ReadTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceContents contents;
  contents.header = (*reader)->header();
  contents.status = ForEachEvent(
      **reader, [&](const v1::Event& event) { contents.events.push_back(event); },
      [&](const v1::TraceTrailer& trailer) {
        contents.has_trailer = true;
        contents.trailer = trailer;
      });
  return contents;
}

std::map<std::pair<uint32_t, int32_t>, v1::SyscallStats> LatestSyscallStats(
    const TraceContents& trace) {
  std::map<std::pair<uint32_t, int32_t>, v1::SyscallStats> latest;
  std::map<std::pair<uint32_t, int32_t>, uint64_t> latest_ts;
  for (const v1::Event& event : trace.events) {
    if (!event.has_syscall_stats()) continue;
    const auto key = std::make_pair(event.tid(), event.syscall_stats().nr());
    auto it = latest_ts.find(key);
    if (it != latest_ts.end() && it->second > event.ts_ns()) continue;
    latest_ts[key] = event.ts_ns();
    latest[key] = event.syscall_stats();
  }
  return latest;
}

namespace {

// Walks the frames; returns their start offsets and where the last ends.
std::vector<uint64_t> WalkFrames(const std::string& bytes, uint64_t* end) {
  std::vector<uint64_t> offsets;
  uint64_t offset = kFileMagicBytes;
  while (offset + kFrameHeaderBytes <= bytes.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
    const uint64_t length = static_cast<uint64_t>(p[0]) | (static_cast<uint64_t>(p[1]) << 8) |
                            (static_cast<uint64_t>(p[2]) << 16) |
                            (static_cast<uint64_t>(p[3]) << 24);
    if (offset + kFrameHeaderBytes + length > bytes.size()) break;
    offsets.push_back(offset);
    offset += kFrameHeaderBytes + length;
  }
  *end = std::min<uint64_t>(offset, bytes.size());
  return offsets;
}

}  // namespace

std::vector<uint64_t> FrameOffsets(const std::string& bytes) {
  uint64_t end = 0;
  return WalkFrames(bytes, &end);
}

uint64_t CompleteFramesEnd(const std::string& bytes) {
  uint64_t end = 0;
  WalkFrames(bytes, &end);
  return end;
}

}  // namespace gpuos::rt
