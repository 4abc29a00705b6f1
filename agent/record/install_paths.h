// Where gpuos-trace finds the files it puts into traced processes: the
// CUDA/NVTX shim and the Python start-up hook sit next to the binary in a
// build tree, or under <prefix>/lib and <prefix>/share once installed.
#pragma once

#include <string>

namespace gpuos {

// The shim library's absolute path: `requested` if readable (or "" if
// not), else the one installed with gpuos-trace, else "".
std::string FindShim(const std::string& requested);

// The directory holding the Python start-up hook, or "".
std::string FindPythonHooks();

}  // namespace gpuos
