// Starting a job prepared for a later attach; see prepare.h.
#include "record/prepare.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "record/install_paths.h"
#include "record/shim_environment.h"

namespace gpuos {

int RunPrepared(const RecordOptions& options) {
  std::string shim = FindShim(options.shim_path);
  if (shim.empty()) {
    fprintf(stderr, "gpuos-trace: --prepare: %s\n",
            options.shim_path.empty()
                ? "the CUDA shim (libgpuos_shim.so) is not installed next to gpuos-trace"
                : ("cannot read the CUDA shim " + options.shim_path).c_str());
    return 1;
  }
  // The tracer's own variables from an outer gpuos-trace must not leak in.
  unsetenv("GPUOS_SHIM_SOCKET");
  unsetenv("GPUOS_CAPTURE");
  for (const std::string& entry :
       ShimEnvironment(shim, /*socket_path=*/"", options.python_hooks ? FindPythonHooks() : "",
                       options.cuda_records, options.capture_spec)) {
    size_t eq = entry.find('=');
    setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
  }
  std::vector<char*> argv;
  for (const std::string& arg : options.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  fprintf(stderr, "gpuos-trace: cannot run '%s': %s\n", argv[0], strerror(errno));
  return 127;
}

}  // namespace gpuos
