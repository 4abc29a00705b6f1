// Finding a shared library a running process has mapped, as a path this
// process can open (for uprobes on libcuda, and to see whether the shim is
// already in an attached process).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/strings/string_view.h"

namespace gpuos {

// The shared library process `pid` has mapped whose file name starts with
// soname_prefix ("libcuda.so" finds libcuda.so.1 and libcuda.so.580.65.06),
// as a path this process can open that names the very file mapped: the
// plain path when it resolves to the same file here, else through
// /proc/PID/root (a container's own filesystem), else /proc/PID/map_files
// (a library replaced on disk since it was loaded).  Empty when none is
// mapped or the process is gone.
std::string FindMappedLibrary(pid_t pid, absl::string_view soname_prefix);

}  // namespace gpuos
