// The shim's fork handlers; see fork_handlers.h.
#include "fork_handlers.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace gpuos_shim {
namespace {

constexpr int kParts = static_cast<int>(ForkPart::kEventChannel) + 1;

// Written once per part, by the caller that claimed it, before `joined`
// says so; read by the handlers.  (No mutex: a fork while one was held
// would leave it locked in the child.)
ForkHooks g_hooks[kParts];
std::atomic<bool> g_claimed[kParts];
std::atomic<bool> g_joined[kParts];
// The parts whose prepare hook ran in this fork: a part joining between
// prepare and the parent/child handlers must not be released there.  glibc
// runs one fork's handlers at a time (under its atfork lock), so one set
// is enough.
bool g_prepared[kParts];

void Prepare() {
  for (int i = 0; i < kParts; ++i) {
    g_prepared[i] = g_joined[i].load(std::memory_order_acquire);
    if (g_prepared[i]) g_hooks[i].prepare();
  }
}

void Parent() {
  for (int i = kParts - 1; i >= 0; --i) {
    if (g_prepared[i]) g_hooks[i].parent();
  }
}

void Child() {
  for (int i = kParts - 1; i >= 0; --i) {
    if (g_prepared[i]) g_hooks[i].child();
  }
}

}  // namespace

void JoinForkHandling(ForkPart part, ForkHooks hooks) {
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(Prepare, Parent, Child); });
  const int i = static_cast<int>(part);
  if (g_claimed[i].exchange(true)) return;
  g_hooks[i] = hooks;
  g_joined[i].store(true, std::memory_order_release);
}

}  // namespace gpuos_shim
