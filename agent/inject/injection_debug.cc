// Step logging of injections; see injection_debug.h.
#include "inject/injection_debug.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_format.h"
#include "inject/remote_process.h"

namespace gpuos::inject {

void InjectionDebugLog(absl::string_view step) {
  // Read every time: no static state to be caught half-initialized by fork.
  if (getenv("GPUOS_INJECT_DEBUG") == nullptr) return;
  std::string line = absl::StrFormat("gpuos-inject: %.3f ms [%d] %s\n", MonotonicNanos() / 1e6,
                                     static_cast<int>(getpid()), step);
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace gpuos::inject
