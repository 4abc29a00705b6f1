// Finding the shim and the Python hook; see install_paths.h.
#include "record/install_paths.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace gpuos {
namespace {

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

// The shim sits next to the binary in a build tree, or in
// <prefix>/lib/gpuos-trace next to <prefix>/bin once installed.
std::string FindShim(const std::string& requested) {
  if (!requested.empty()) return access(requested.c_str(), R_OK) == 0 ? requested : "";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  std::string dir = Dirname(exe);
  for (const std::string& candidate :
       {dir + "/libgpuos_shim.so", dir + "/../lib/gpuos-trace/libgpuos_shim.so"}) {
    if (access(candidate.c_str(), R_OK) == 0) {
      char resolved[4096];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return "";
}

static std::string ExeDir() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  return Dirname(exe);
}

std::string FindPythonHooks() {
  std::string dir = ExeDir();
  for (const std::string& candidate :
       {dir + "/python_hooks", dir + "/../share/gpuos-trace/python_hooks"}) {
    if (access((candidate + "/sitecustomize.py").c_str(), R_OK) == 0) {
      char resolved[4096];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return "";
}

}  // namespace gpuos
