// The syscall source's user side (bpf/syscalls.bpf.c with mm.bpf.h and
// futex.bpf.h): per-thread syscall totals, kept in per-thread slots of the
// mmapped syscall_slots array or in the syscall_stats map, and the mmap,
// munmap and futex wait calls it records one by one.  BpfSession reads the
// totals through it.
#pragma once

#include <cstdint>
#include <vector>

#include "record/bpf_session.h"
#include "record/sources/bpf_source.h"

namespace gpuos {

class SyscallsSource : public BpfSource {
 public:
  // One walk of syscall_stats and of the slots (see bpf_session.h).
  virtual KernelSyscallTables ReadTables() const = 0;
};

}  // namespace gpuos
