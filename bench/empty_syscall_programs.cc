// Attaches bench/empty_syscall_programs.bpf.c's two empty programs, runs a
// command and waits for it, then detaches: a stand-in for gpuos-trace in
// bench/compare_untraced.sh, which starts "TRACER [options] -- cmd" and
// stops it with SIGINT.  Options before "--" are accepted and ignored.
//   empty_syscall_programs [ignored options] -- cmd args...
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "empty_syscall_programs.skel.h"

namespace {

volatile sig_atomic_t g_child = 0;

void Forward(int signo) {
  if (g_child > 0) kill(g_child, signo);
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  while (first < argc && strcmp(argv[first], "--") != 0) ++first;
  if (first + 1 >= argc) {
    fprintf(stderr, "usage: empty_syscall_programs [options] -- cmd args...\n");
    return 2;
  }
  empty_syscall_programs_bpf* skel = empty_syscall_programs_bpf__open_and_load();
  if (!skel) {
    fprintf(stderr, "empty_syscall_programs: cannot load the programs: %s\n", strerror(errno));
    return 1;
  }
  if (int err = empty_syscall_programs_bpf__attach(skel); err) {
    fprintf(stderr, "empty_syscall_programs: cannot attach the programs: %s\n", strerror(-err));
    empty_syscall_programs_bpf__destroy(skel);
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = Forward;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const pid_t child = fork();
  if (child == 0) {
    execvp(argv[first + 1], argv + first + 1);
    fprintf(stderr, "empty_syscall_programs: cannot run %s: %s\n", argv[first + 1], strerror(errno));
    _exit(127);
  }
  g_child = child;
  int status = 0;
  while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  empty_syscall_programs_bpf__destroy(skel);
  return child < 0 ? 1 : 0;
}
