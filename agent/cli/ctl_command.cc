// See ctl_command.h.
#include "cli/ctl_command.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "record/flight_control.h"
#include "record/shim_control_client.h"

namespace gpuos {
namespace {

// How long the recorder gets to write a window out.
constexpr int kWaitMs = 30'000;

std::vector<std::string> ReadArgv(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  std::vector<std::string> argv;
  if (text.empty()) return argv;
  if (text.back() == '\0') text.pop_back();
  for (absl::string_view arg : absl::StrSplit(text, '\0')) argv.emplace_back(arg);
  return argv;
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The comm may hold spaces and parentheses: the fields follow the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  int ppid = 0;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &ppid)) return 0;
  return ppid;
}

bool IsFlightRecorder(const std::vector<std::string>& argv) {
  if (argv.empty() || !absl::EndsWith(argv[0], "gpuos-trace")) return false;
  for (const std::string& arg : argv) {
    if (arg == "--") break;
    if (arg == "--flight-recorder" || absl::StartsWith(arg, "--flight-recorder=")) return true;
  }
  return false;
}

std::string ReadLink(const std::string& path) {
  char buffer[4096];
  ssize_t n = readlink(path.c_str(), buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

// Dump files in `dir` whose name starts with `prefix`, with their
// modification times: a dump is a file that is new or changed since.
std::map<std::string, int64_t> Dumps(const std::string& dir, const std::string& prefix) {
  std::map<std::string, int64_t> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, prefix) || !absl::StrContains(name, ".dump-") || !absl::EndsWith(name, ".gpuos")) {
      continue;
    }
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (stat(path.c_str(), &st) != 0) continue;
    found[path] = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  }
  closedir(d);
  return found;
}

}  // namespace

namespace {

// `ctl --pid PID capture N`: through the shim's control socket in PID.
int RunCtlCapture(const CtlCommand& command) {
  auto client = ShimControlClient::Connect(command.pid);
  if (!client.ok()) {
    fprintf(stderr,
            "gpuos-trace: ctl capture: %s (PID must be a process of a job traced with --capture or "
            "--always-on, or started with --prepare)\n",
            std::string(client.status().message()).c_str());
    return 1;
  }
  auto reply = (*client)->Capture(std::to_string(command.capture_steps), absl::Seconds(5));
  if (!reply.ok()) {
    fprintf(stderr, "gpuos-trace: ctl capture: %s\n", std::string(reply.status().message()).c_str());
    return 1;
  }
  printf("pid %d: capture%s\n", command.pid, reply->empty() ? "" : (" " + *reply).c_str());
  return 0;
}

}  // namespace

int RunCtl(const CtlCommand& command) {
  if (command.action == "capture") return RunCtlCapture(command);
  int tracer = command.pid;
  std::vector<std::string> argv;
  for (int hops = 0; tracer > 1 && hops < 64; ++hops) {
    argv = ReadArgv(tracer);
    if (IsFlightRecorder(argv)) break;
    tracer = ParentOf(tracer);
  }
  if (tracer <= 1 || !IsFlightRecorder(argv)) {
    fprintf(stderr,
            "gpuos-trace: pid %d is not a gpuos-trace --flight-recorder, nor run by one (or its command line "
            "cannot be read)\n",
            command.pid);
    return 1;
  }

  // Where the dump will appear: next to the recorder's output, named after it.
  std::string dir = ReadLink("/proc/" + std::to_string(tracer) + "/cwd");
  std::string prefix = "gpuos-trace-";
  std::vector<std::string> record_args(argv.begin(), argv.end());
  auto parsed = ParseCommandLine(record_args, "");
  if (parsed.ok() && parsed->kind == ParsedCommandLine::Kind::kRecord &&
      parsed->record.output_path != "gpuos-trace-.gpuos") {
    std::string output = parsed->record.output_path;
    if (!absl::StartsWith(output, "/")) output = dir + "/" + output;
    const size_t slash = output.rfind('/');
    dir = output.substr(0, slash);
    prefix = output.substr(slash + 1);
    if (absl::EndsWith(prefix, ".gpuos")) prefix.resize(prefix.size() - 6);
    prefix += ".dump-";
  }

  const std::map<std::string, int64_t> before = Dumps(dir, prefix);
  sigval value{};
  value.sival_int = kCtlDumpValue;
  if (sigqueue(tracer, SIGUSR1, value) != 0) {
    fprintf(stderr, "gpuos-trace: cannot signal gpuos-trace (pid %d): %s%s\n", tracer, strerror(errno),
            errno == EPERM ? " (run ctl as the user that started it, or as root)" : "");
    return 1;
  }
  for (int waited = 0; waited < kWaitMs; waited += 50) {
    bool found = false;
    for (const auto& [path, mtime] : Dumps(dir, prefix)) {
      auto it = before.find(path);
      if (it != before.end() && it->second == mtime) continue;
      printf("%s\n", path.c_str());
      found = true;
    }
    if (found) return 0;
    if (kill(tracer, 0) != 0 && errno == ESRCH) {
      fprintf(stderr, "gpuos-trace: gpuos-trace (pid %d) ended before writing a dump\n", tracer);
      return 1;
    }
    usleep(50'000);
  }
  fprintf(stderr, "gpuos-trace: asked gpuos-trace (pid %d) to dump; no dump appeared in %s within %d s (see its stderr)\n",
          tracer, dir.c_str(), kWaitMs / 1000);
  return 1;
}

}  // namespace gpuos
