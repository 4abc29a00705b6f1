// A thread whose last mmap/munmap calls are still unsent when an attached
// gpuos-trace stops: it spins without a syscall until SIGUSR1, then makes
// --pairs mmap/munmap pairs of --bytes (a size nothing else here maps), all
// within far less than a millisecond, then spins again until SIGTERM and
// exits 0.  Spinning never blocks, so the kernel side keeps those calls in
// the thread's batch (bpf/mm.h) until the tracer reads them at its end.
// Usage: mm_then_spin [--pairs N] [--bytes B]
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<bool> g_go{false};
std::atomic<bool> g_stop{false};

void OnSignal(int signo) {
  if (signo == SIGUSR1) g_go = true;
  if (signo == SIGTERM) g_stop = true;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 3;
  size_t bytes = 11 * 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--pairs") == 0) {
      pairs = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--bytes") == 0) {
      bytes = strtoull(argv[i + 1], nullptr, 10);
    } else {
      fprintf(stderr, "usage: mm_then_spin [--pairs N] [--bytes B]\n");
      return 2;
    }
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  while (!g_go) {
  }
  for (int i = 0; i < pairs; ++i) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    munmap(p, bytes);
  }
  while (!g_stop) {
  }
  return 0;
}
