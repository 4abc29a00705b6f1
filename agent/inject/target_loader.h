// Where the dynamic loader's entry points (dlopen, dlsym, dlerror, dlclose)
// and a `syscall` instruction are in another process: from /proc/PID/maps
// and the .dynsym of the C library that process has mapped, read through
// /proc/PID/map_files or /proc/PID/root so that a process in a container
// is read from its own files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "inject/remote_process.h"

namespace gpuos::inject {

struct TargetLoader {
  uint64_t dlopen = 0;
  uint64_t dlsym = 0;
  uint64_t dlerror = 0;
  uint64_t dlclose = 0;
  // Two bytes 0f 05 in executable memory of the target: the thread runs
  // mmap there before any code of ours is in the process.
  uint64_t syscall_instruction = 0;
  std::string libc_path;  // as /proc/PID/maps names it
  // Everything the C library, libpthread, libdl and the dynamic loader
  // have mapped (their .bss included).  A thread waiting on a futex in
  // there is inside the C library's own locking (malloc, dlopen, stdio)
  // and may hold another of its locks: no place to call dlopen from.
  std::vector<std::pair<uint64_t, uint64_t>> runtime_ranges;
};

absl::StatusOr<TargetLoader> FindTargetLoader(pid_t pid);

// Whether `address` falls in one of `ranges`.
bool InRanges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t address);

}  // namespace gpuos::inject
