// A command for launcher_test to launch: each mode does one thing the test
// can observe (exit code, death by signal, identity, argv, environment,
// start time, daemonizing) and writes what it saw to a file.  Files are
// written to FILE.tmp and renamed, so a reader never sees half of one.
//
//   launcher_probe exit CODE
//   launcher_probe raise SIGNO       dies of it, if its disposition is the default
//   launcher_probe ids FILE           uid/gid/groups and HOME/USER/LOGNAME
//   launcher_probe args FILE ARG...   the ARGs, each followed by a NUL
//   launcher_probe env FILE NAME...   NAME=value, or NAME unset
//   launcher_probe stamp FILE         CLOCK_MONOTONIC ns at start
//   launcher_probe sleep MS [FILE]    sleeps, then writes "done"
//   launcher_probe daemon FILE MS     double fork + setsid; the grandchild
//                                     waits for its re-parenting, sleeps,
//                                     then writes its new parent's pid
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    perror(tmp.c_str());
    return false;
  }
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok) return false;
  return rename(tmp.c_str(), path.c_str()) == 0;
}

std::string EnvLine(const char* name) {
  const char* value = getenv(name);
  return value == nullptr ? std::string(name) + " unset\n" : std::string(name) + "=" + value + "\n";
}

void SleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int Usage() {
  fprintf(stderr, "usage: launcher_probe MODE ARGS... (see launcher_probe.cc)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  if (argc < 3) return Usage();
  const std::string mode = argv[1];

  if (mode == "exit") return atoi(argv[2]);
  if (mode == "raise") {
    // No signal() first: the test checks the launcher gave us the defaults.
    raise(atoi(argv[2]));
    return 1;  // the signal was blocked or ignored
  }
  const std::string file = argv[2];
  if (mode == "ids") {
    std::string text = "uid=" + std::to_string(getuid()) + "\neuid=" + std::to_string(geteuid()) +
                       "\ngid=" + std::to_string(getgid()) +
                       "\negid=" + std::to_string(getegid()) + "\ngroups=";
    gid_t groups[256];
    const int n = getgroups(256, groups);
    for (int i = 0; i < n; ++i) text += (i ? "," : "") + std::to_string(groups[i]);
    text += "\n" + EnvLine("HOME") + EnvLine("USER") + EnvLine("LOGNAME");
    return WriteFileAtomically(file, text) ? 0 : 1;
  }
  if (mode == "args") {
    std::string text;
    for (int i = 3; i < argc; ++i) text.append(argv[i], strlen(argv[i]) + 1);
    return WriteFileAtomically(file, text) ? 0 : 1;
  }
  if (mode == "env") {
    std::string text;
    for (int i = 3; i < argc; ++i) text += EnvLine(argv[i]);
    return WriteFileAtomically(file, text) ? 0 : 1;
  }
  if (mode == "stamp") {
    const long long ns = start.tv_sec * 1000000000LL + start.tv_nsec;
    return WriteFileAtomically(file, std::to_string(ns) + "\n") ? 0 : 1;
  }
  if (mode == "sleep") {
    SleepMs(atol(argv[2]));
    if (argc > 3 && !WriteFileAtomically(argv[3], "done\n")) return 1;
    return 0;
  }
  if (mode == "daemon") {
    if (argc < 4) return Usage();
    const long ms = atol(argv[3]);
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child > 0) return 0;  // the command itself ends at once
    setsid();
    const pid_t intermediate = getpid();
    const pid_t grandchild = fork();
    if (grandchild < 0) _exit(1);
    if (grandchild > 0) _exit(0);
    for (int i = 0; i < 2000 && getppid() == intermediate; ++i) SleepMs(1);
    SleepMs(ms);
    _exit(WriteFileAtomically(file, "ppid=" + std::to_string(getppid()) + "\n") ? 0 : 1);
  }
  return Usage();
}
