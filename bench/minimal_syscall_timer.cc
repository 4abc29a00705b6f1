// Runs a command under bench/minimal_syscall_timer.bpf.c (the floor under
// issue #2's per-syscall requirement) as a stand-in for gpuos-trace in the
// benchmark scripts, which start "TRACER [options] -- cmd" and stop it
// with SIGINT.  Options before "--" are accepted and ignored.  The command
// is traced from its first instruction: it waits on a pipe until its pid is
// in the traced set and the programs are attached.  At the end, the number
// of syscalls counted goes to stderr, so a run that counted nothing shows.
//   minimal_syscall_timer [ignored options] -- cmd args...
#include <bpf/bpf.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "minimal_syscall_timer.skel.h"

namespace {

volatile sig_atomic_t g_child = 0;

void Forward(int signo) {
  if (g_child > 0) kill(g_child, signo);
}

// Syscalls counted over every thread entry (threads map: 1024 entries of
// tid, nr, start and 512 per-syscall totals).
uint64_t CountedCalls(const minimal_syscall_timer_bpf* skel) {
  constexpr int kThreads = 1024, kNrs = 512;
  struct Totals {
    uint64_t calls, total_ns, max_ns;
  };
  struct ThreadCalls {
    uint32_t tid;
    int32_t nr;
    uint64_t start_ns;
    Totals per_nr[kNrs];
  };
  std::vector<ThreadCalls> entry(1);
  uint64_t calls = 0;
  const int fd = bpf_map__fd(skel->maps.threads);
  for (uint32_t i = 0; i < kThreads; ++i) {
    if (bpf_map_lookup_elem(fd, &i, entry.data()) != 0 || entry[0].tid == 0) continue;
    for (const Totals& t : entry[0].per_nr) calls += t.calls;
  }
  return calls;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  while (first < argc && strcmp(argv[first], "--") != 0) ++first;
  if (first + 1 >= argc) {
    fprintf(stderr, "usage: minimal_syscall_timer [options] -- cmd args...\n");
    return 2;
  }
  int go[2];
  if (pipe(go) != 0) {
    perror("minimal_syscall_timer: pipe");
    return 1;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(126);  // the loader failed
    close(go[0]);
    execvp(argv[first + 1], argv + first + 1);
    fprintf(stderr, "minimal_syscall_timer: cannot run %s: %s\n", argv[first + 1], strerror(errno));
    _exit(127);
  }
  close(go[0]);
  if (child < 0) {
    perror("minimal_syscall_timer: fork");
    return 1;
  }
  g_child = child;
  struct sigaction action {};
  action.sa_handler = Forward;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  minimal_syscall_timer_bpf* skel = minimal_syscall_timer_bpf__open_and_load();
  int err = skel ? minimal_syscall_timer_bpf__attach(skel) : -errno;
  if (err == 0) {
    const uint32_t index = static_cast<uint32_t>(child) / 64;
    const uint64_t bit = uint64_t{1} << (child % 64);
    err = bpf_map_update_elem(bpf_map__fd(skel->maps.traced_tgids), &index, &bit, BPF_ANY);
  }
  if (err != 0) {
    fprintf(stderr, "minimal_syscall_timer: cannot load or attach the programs: %s\n",
            strerror(err < 0 ? -err : errno));
    close(go[1]);  // the child exits unrun
    waitpid(child, nullptr, 0);
    minimal_syscall_timer_bpf__destroy(skel);
    return 1;
  }
  if (write(go[1], "g", 1) != 1) perror("minimal_syscall_timer: write");
  close(go[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  fprintf(stderr, "minimal_syscall_timer: %llu syscalls counted\n",
          static_cast<unsigned long long>(CountedCalls(skel)));
  minimal_syscall_timer_bpf__destroy(skel);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
