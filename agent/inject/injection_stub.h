// The code the borrowed thread runs in the target: a position-independent
// x86_64 stub, written with its parameters into two fresh pages of the
// target (code, then data).  Entered with every register as the thread is to
// resume with (its interrupted syscall already set up to restart), it:
//   - steps below the red zone and pushes all general registers and flags;
//   - makes the data page writable (the pages are mapped PROT_READ|PROT_EXEC
//     so that a write+execute mapping never exists), marks itself started;
//   - saves the whole vector state with XSAVE (FXSAVE without it): the
//     interrupted code may have live xmm/ymm/zmm/k registers that dlopen's
//     memcpy and the library's constructors are free to clobber;
//   - calls dlopen(path, RTLD_NOW), dlsym(handle, entry) and
//     entry(argument, page, 2 pages, gettid()) on a 64-byte aligned stack;
//     on failure copies dlerror()'s text into the data page and dlcloses;
//   - writes its final state, restores everything and jumps to the saved
//     resume address.  From the moment the thread is detached it needs
//     nobody: the guardian only watches the state word.
// The entry function unmaps both pages once the thread has left them (the
// contract of gpuos_shim_attach_entry); on failure they stay mapped (8 KiB).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpuos::inject {

// The stub's two pages: code at the start, data one page later.
constexpr uint64_t kStubMapSize = 8192;
constexpr uint64_t kStubDataOffset = 4096;

// How the stub saves the vector/FPU state: the XSAVE components it saves
// and the size of their (standard-format) save area.
struct CpuStateSave {
  bool use_xsave = false;
  uint64_t xsave_mask = 0;
  uint64_t area_size = 576;
};
// For this machine's CPU and kernel (XCR0 is the same for every process):
// every enabled component except AMX tile state, which only code that asked
// the kernel for it (arch_prctl) can use, and which ordinary library code
// never touches.
CpuStateSave ProbeCpuStateSave();

struct StubParameters {
  uint64_t return_rip = 0;  // where the thread resumes (restart-adjusted)
  uint64_t dlopen = 0;
  uint64_t dlsym = 0;
  uint64_t dlerror = 0;
  uint64_t dlclose = 0;
  std::string library_path;  // < 1024 bytes
  std::string entry_symbol;  // < 256 bytes
  std::string argument;      // < 2048 bytes
  CpuStateSave cpu_state;
  // Random per injection: once the entry has unmapped the pages, the
  // process may map something else at their address.
  uint64_t cookie = 0;
};

// The kStubMapSize bytes to write at the mapped address.
absl::StatusOr<std::string> BuildStubImage(const StubParameters& parameters);

enum class StubState : uint32_t {
  kNotStarted = 0,
  kStarted = 1,        // running dlopen / the entry function
  kEntryReturned = 2,  // done; the thread is leaving (or has left) the page
  kLoadFailed = 3,     // dlopen or dlsym failed; see error
};

struct StubProgress {
  StubState state = StubState::kNotStarted;
  pid_t tid = 0;  // the thread's id as the target's pid namespace sees it
  std::string error;
};

// Reads the stub's data page; fails when it is not mapped (any more) or
// no longer holds `cookie`.
absl::StatusOr<StubProgress> ReadStubProgress(pid_t pid, uint64_t map_address, uint64_t cookie);

}  // namespace gpuos::inject
