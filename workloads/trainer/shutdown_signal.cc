// See shutdown_signal.h.  The handler only stores the signal number and
// restores the default action; everything else happens in normal code.
#include "shutdown_signal.h"

#include <signal.h>

#include <atomic>

namespace gpuos::trainer {
namespace {

std::atomic<int> g_shutdown_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

void OnShutdownSignal(int signo) {
  g_shutdown_signal.store(signo, std::memory_order_relaxed);
  // A second Ctrl-C should not wait for a long step to finish.
  signal(signo, SIG_DFL);
}

}  // namespace

void InstallShutdownHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int ShutdownSignal() { return g_shutdown_signal.load(std::memory_order_relaxed); }

}  // namespace gpuos::trainer
