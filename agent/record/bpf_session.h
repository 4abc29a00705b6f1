// Loads gpuos-trace's event sources (record/sources/: each a BPF program
// and its user side) into the kernel, attaches them, and gives the recorder
// what they produce: ring-buffer records as they come, and the totals kept
// in kernel maps.  Keeps what the sources share: the ring buffer, the
// traced set, drop counts and libbpf's messages.  Follows libbpf's
// open -> configure -> load -> attach order; the maps every program shares
// (traced_tgids, events, drop_counts, thread_state, the syscall slots) are
// created by the first object and reused by the others.  Destroying the
// session detaches everything: nothing of ours stays in the kernel.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bpf/syscalls.h"
#include "record/sources/bpf_source.h"

struct bpf_object;

namespace gpuos {

struct BpfSessionOptions {
  // Ring buffer size in bytes: a power of two, at least one page.
  uint64_t ring_buffer_bytes = 16ull << 20;
  uint64_t fault_window_ns = 1'000'000;
  uint32_t max_threads = 65536;
  // Slots of the syscall_slots array (RecordOptions::syscall_slots).
  uint32_t syscall_slots = GPUOS_DEFAULT_SYSCALL_SLOTS;
  // Kernel BTF to use instead of /sys/kernel/btf/vmlinux (empty: default).
  std::string btf_path;
  // Print libbpf's own messages.
  bool verbose = false;
  // No warning when an optional source (bpf_source.h) is left off.
  bool quiet = false;
  // AttachCudaUprobes: one uprobe_multi link per process where the kernel
  // has a sound one (6.10+), which detaches in a blink; false: one
  // perf-event link per function, as on older kernels (about 0.1 s each to
  // detach).
  bool cuda_uprobe_multi = true;
};

// One (thread, syscall) total from the kernel's syscall_stats map.
struct KernelSyscallTotal {
  uint32_t pid = 0;
  uint32_t tid = 0;
  int32_t nr = 0;
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
};

struct KernelFutexWakes {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t calls = 0;
  uint64_t woken = 0;
};

// What the kernel's syscall_stats map holds, split as the stream wants it:
// per-(thread, syscall) totals (futex wake calls added back into their
// syscall's) and per-thread futex wake counts.
struct KernelSyscallTables {
  std::vector<KernelSyscallTotal> totals;
  std::vector<KernelFutexWakes> wakes;
};

// Events the kernel side lost, by reason ("ringbuf:<kind>", "map_full:<map>").
struct KernelDrops {
  std::vector<std::pair<std::string, uint64_t>> by_reason;
  uint64_t total = 0;
};

class BpfSession {
 public:
  // Called with each raw ring-buffer record (bpf/event_header.h layout).
  using RecordHandler = BpfRecordHandler;

  static absl::StatusOr<std::unique_ptr<BpfSession>> Start(const BpfSessionOptions& options,
                                                          RecordHandler handler);
  ~BpfSession();
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  // Adds a process (thread group) to the traced set; its future children
  // are added by the kernel side.  NotFound when the process has already
  // ended (then nothing is left set for a later process with its id).
  absl::Status Track(uint32_t pid);
  // Takes a process out of the traced set (its children keep their bits).
  void Untrack(uint32_t pid);

  // Points the maps every program shares (the traced set, the ring buffer,
  // drop counts, per-thread state) of an object opened but not yet loaded
  // at this session's: for BPF objects kept elsewhere
  // (record/torch_backward_probes.h).
  absl::Status ShareMapsWith(struct bpf_object* obj) const;
  const BpfSessionOptions& options() const;

  // A file descriptor that becomes readable when records are waiting.
  int ring_buffer_fd() const;
  // Hands every waiting record to the handler; returns how many.
  absl::StatusOr<int> Consume();

  // The end of a recording whose threads may live on (attach mode, or a
  // launched tree that left processes behind): detaches the programs that
  // make records, hands the handler every record still waiting, then the
  // mmap/munmap calls still held in the threads' slots (bpf/mm.h), as the
  // records they would have become.  Nothing is recorded afterwards; the
  // maps stay readable.
  void DetachAndDrain();

  // One walk of the syscall_stats map.
  KernelSyscallTables ReadSyscallTables() const;
  KernelDrops ReadDrops() const;
  // Per program: runs the kernel skipped because another BPF program was
  // already running on that CPU (each is a lost event).
  std::vector<std::pair<std::string, uint64_t>> ReadRecursionMisses() const;
  // Frees the kernel-map entries of threads that have exited, once their
  // totals have been read and written.
  void ForgetThreads(const std::vector<uint32_t>& tids);

  // Records the CUDA driver API calls of process `pid` (launches, copies,
  // memsets, synchronization: bpf/cuda_uprobes.h's list) with uprobes on
  // its driver library, CPU side only: the fallback when the CUPTI shim
  // cannot be put into a running process.  library_path is that library as
  // this process can open it (FindMappedLibrary).  Calls are recorded only
  // while pid is also Track()ed.  Loads the uprobe programs on first use.
  // Returns how many functions were probed (names at one address count
  // once); an error when the library exports none of them, or when pid
  // already has them.  The probes go with the session.
  absl::StatusOr<int> AttachCudaUprobes(pid_t pid, const std::string& library_path);

 private:
  struct Impl;
  explicit BpfSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether the benchmark knob GPUOS_BENCH_DETACH (a comma list of source
// names, bpf_source.h, and BPF program names) leaves `name` unattached:
// for bench/always_on_overhead.sh's os-without variants, which split what the OS side costs a job by
// recording it with parts left off.  Such a recording misses those events.
bool BenchDetaches(absl::string_view name);

// Names for event kinds, as used in drop reports (from the sources' lists).
const char* EventKindName(uint32_t kind);

}  // namespace gpuos
