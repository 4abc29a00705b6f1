// Looking at a running process from outside, through /proc and
// process_vm_readv: its memory mappings, its threads and the syscall each is
// blocked in, status fields, and its memory.  The library injector plans
// with these in gpuos-trace and its guardian process uses them again while
// it holds a thread, so everything here is plain syscalls and std
// containers (no locks that a fork could leave taken).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuos::inject {

// One line of /proc/PID/maps.
struct MemoryMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  std::string perms;  // "r-xp"
  uint64_t offset = 0;
  std::string dev;    // "fd:01"
  uint64_t inode = 0;
  std::string path;   // "" when anonymous; "[stack]"; " (deleted)" kept

  bool Contains(uint64_t address) const { return address >= start && address < end; }
  bool readable() const { return perms.size() > 0 && perms[0] == 'r'; }
  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
};

absl::StatusOr<std::vector<MemoryMapping>> ReadMappings(pid_t pid);
// The mapping that holds `address`, if any.
const MemoryMapping* FindMapping(const std::vector<MemoryMapping>& mappings, uint64_t address);

// What /proc/PID/task/TID/syscall says about a thread.
struct ThreadSyscallState {
  enum class Kind { kRunning, kInSyscall, kBlockedOutsideSyscall };
  Kind kind = Kind::kRunning;
  int64_t nr = -1;
  uint64_t args[6] = {};
  uint64_t sp = 0;
  uint64_t pc = 0;
};
absl::StatusOr<ThreadSyscallState> ReadThreadSyscall(pid_t pid, pid_t tid);

// The thread ids of a process (/proc/PID/task), ascending; empty when gone.
std::vector<pid_t> ListThreads(pid_t pid);
// The value of one "Key:\tvalue" line of /proc/PID/task/TID/status;
// nullopt when the thread or the line is absent.
std::optional<std::string> StatusField(pid_t pid, pid_t tid, absl::string_view key);
// The state letter of /proc/PID/task/TID/stat ('R', 'S', 'D', 't', 'T',
// 'Z', ...), or 0 when the thread is gone.
char ThreadState(pid_t pid, pid_t tid);
// The kernel's PF_* flags of a process (field 9 of /proc/PID/stat).
std::optional<uint64_t> ProcessFlags(pid_t pid);
// Signals pending for a thread (its own and its process's) that it does
// not block: these would be delivered the moment it runs again.
std::optional<uint64_t> DeliverableSignals(pid_t pid, pid_t tid);

// Whole small files (/proc, /sys); nullopt when unreadable.
std::optional<std::string> ReadSmallFile(const std::string& path);

// Reads the target's memory; fails on any unmapped or unreadable byte.
absl::Status ReadMemory(pid_t pid, uint64_t address, void* buffer, size_t size);
// Writes through /proc/PID/mem, which (for the process's ptracer) also
// writes pages mapped without PROT_WRITE, as a debugger's breakpoints do.
absl::Status WriteMemoryForced(pid_t pid, uint64_t address, const void* data, size_t size);

// CLOCK_MONOTONIC in nanoseconds; usable after fork in a threaded process.
int64_t MonotonicNanos();
void SleepNanos(int64_t nanos);

}  // namespace gpuos::inject
