// The path under which a process can dlopen a library of ours: the same
// path when its mount namespace sees the same file there, else a copy put in
// its own /tmp (a process in a container sees neither our paths nor our
// files).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace gpuos::inject {

absl::StatusOr<std::string> LibraryPathInTarget(pid_t pid, const std::string& library_path);

}  // namespace gpuos::inject
