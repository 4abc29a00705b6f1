// The shim's environment; see shim_environment.h.
#include "record/shim_environment.h"

#include <cstdio>
#include <cstdlib>

namespace gpuos {

std::vector<std::string> ShimEnvironment(const std::string& shim, const std::string& socket_path,
                                         const std::string& python_hooks_dir,
                                         const std::string& cuda_records,
                                         const std::string& capture_spec) {
  std::vector<std::string> env;
  const char* preload = getenv("LD_PRELOAD");
  env.push_back("LD_PRELOAD=" + shim + (preload && *preload ? std::string(" ") + preload : ""));
  for (const char* name : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}) {
    const char* existing = getenv(name);
    if (existing && *existing && shim != existing) {
      // Another tool (Nsight Systems?) is injected: leave it in place.
      fprintf(stderr, "gpuos-trace: warning: %s is already set to %s; keeping it, so %s events "
              "are not recorded\n", name, existing,
              std::string(name).rfind("CUDA", 0) == 0 ? "CUDA" : "NVTX");
      continue;
    }
    env.push_back(std::string(name) + "=" + shim);
  }
  if (socket_path.empty()) {
    env.push_back("GPUOS_SHIM_PREPARED=1");
  } else {
    env.push_back("GPUOS_SHIM_SOCKET=" + socket_path);
  }
  if (!cuda_records.empty()) env.push_back("GPUOS_CUPTI_KINDS=" + cuda_records);
  if (!capture_spec.empty()) env.push_back("GPUOS_CAPTURE=" + capture_spec);
  if (!python_hooks_dir.empty()) {
    const char* path = getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + python_hooks_dir + (path && *path ? std::string(":") + path : ""));
  }
  return env;
}

}  // namespace gpuos
