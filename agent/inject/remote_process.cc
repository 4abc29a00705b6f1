// /proc and process_vm_readv access to another process; see remote_process.h.
#include "inject/remote_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpuos::inject {
namespace {

std::string TaskDir(pid_t pid, pid_t tid) { return absl::StrFormat("/proc/%d/task/%d", pid, tid); }

bool ParseHex(absl::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *value = v;
  return true;
}

// "0x7ffd..." as printed by /proc/PID/syscall.
bool ParsePrefixedHex(absl::string_view text, uint64_t* value) {
  if (!absl::ConsumePrefix(&text, "0x")) return false;
  return ParseHex(text, value);
}

}  // namespace

std::optional<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  char buffer[8192];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

absl::StatusOr<std::vector<MemoryMapping>> ReadMappings(pid_t pid) {
  auto text = ReadSmallFile(absl::StrFormat("/proc/%d/maps", pid));
  if (!text) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read /proc/%d/maps: %s", pid, strerror(errno)));
  }
  std::vector<MemoryMapping> mappings;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // start-end perms offset dev inode [path]
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits(' ', 5), absl::SkipEmpty());
    if (fields.size() < 5) continue;
    MemoryMapping m;
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(fields[0], '-');
    if (!ParseHex(range.first, &m.start) || !ParseHex(range.second, &m.end)) continue;
    m.perms = std::string(fields[1]);
    if (!ParseHex(fields[2], &m.offset)) continue;
    m.dev = std::string(fields[3]);
    if (!absl::SimpleAtoi(fields[4], &m.inode)) continue;
    if (fields.size() == 6) m.path = std::string(absl::StripLeadingAsciiWhitespace(fields[5]));
    mappings.push_back(std::move(m));
  }
  return mappings;
}

const MemoryMapping* FindMapping(const std::vector<MemoryMapping>& mappings, uint64_t address) {
  for (const MemoryMapping& m : mappings) {
    if (m.Contains(address)) return &m;
  }
  return nullptr;
}

absl::StatusOr<ThreadSyscallState> ReadThreadSyscall(pid_t pid, pid_t tid) {
  auto text = ReadSmallFile(TaskDir(pid, tid) + "/syscall");
  if (!text) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read /proc/%d/task/%d/syscall: %s", pid, tid, strerror(errno)));
  }
  ThreadSyscallState state;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ', absl::SkipEmpty());
  if (fields.empty()) return absl::InternalError("empty /proc/PID/task/TID/syscall");
  if (fields[0] == "running") return state;
  int64_t nr = 0;
  if (!absl::SimpleAtoi(fields[0], &nr)) {
    return absl::InternalError(absl::StrCat("unexpected syscall file: ", *text));
  }
  if (nr < 0) {
    // "-1 sp pc": blocked, but not in a syscall (a page fault, say).
    state.kind = ThreadSyscallState::Kind::kBlockedOutsideSyscall;
    if (fields.size() >= 3) {
      ParsePrefixedHex(fields[1], &state.sp);
      ParsePrefixedHex(fields[2], &state.pc);
    }
    return state;
  }
  if (fields.size() < 9) return absl::InternalError(absl::StrCat("short syscall file: ", *text));
  state.kind = ThreadSyscallState::Kind::kInSyscall;
  state.nr = nr;
  for (int i = 0; i < 6; ++i) ParsePrefixedHex(fields[1 + i], &state.args[i]);
  ParsePrefixedHex(fields[7], &state.sp);
  ParsePrefixedHex(fields[8], &state.pc);
  return state;
}

std::vector<pid_t> ListThreads(pid_t pid) {
  std::vector<pid_t> tids;
  DIR* dir = opendir(absl::StrFormat("/proc/%d/task", pid).c_str());
  if (dir == nullptr) return tids;
  while (struct dirent* entry = readdir(dir)) {
    int tid = 0;
    if (absl::SimpleAtoi(entry->d_name, &tid) && tid > 0) tids.push_back(tid);
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::optional<std::string> StatusField(pid_t pid, pid_t tid, absl::string_view key) {
  auto text = ReadSmallFile(TaskDir(pid, tid) + "/status");
  if (!text) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, ":")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return std::nullopt;
}

namespace {

// Fields of /proc/.../stat after "(comm)", which may itself hold spaces.
std::vector<std::string> StatFieldsAfterComm(const std::string& path) {
  auto text = ReadSmallFile(path);
  if (!text) return {};
  size_t close_paren = text->rfind(')');
  if (close_paren == std::string::npos) return {};
  return absl::StrSplit(text->substr(close_paren + 1), ' ', absl::SkipEmpty());
}

}  // namespace

char ThreadState(pid_t pid, pid_t tid) {
  std::vector<std::string> fields = StatFieldsAfterComm(TaskDir(pid, tid) + "/stat");
  if (fields.empty() || fields[0].empty()) return 0;
  return fields[0][0];
}

std::optional<uint64_t> ProcessFlags(pid_t pid) {
  // Field 3 is the state; flags is field 9, the 7th after the state.
  std::vector<std::string> fields = StatFieldsAfterComm(absl::StrFormat("/proc/%d/stat", pid));
  uint64_t flags = 0;
  if (fields.size() < 7 || !absl::SimpleAtoi(fields[6], &flags)) return std::nullopt;
  return flags;
}

std::optional<uint64_t> DeliverableSignals(pid_t pid, pid_t tid) {
  auto own = StatusField(pid, tid, "SigPnd");
  auto shared = StatusField(pid, tid, "ShdPnd");
  auto blocked = StatusField(pid, tid, "SigBlk");
  uint64_t own_bits = 0, shared_bits = 0, blocked_bits = 0;
  if (!own || !shared || !blocked || !ParseHex(*own, &own_bits) ||
      !ParseHex(*shared, &shared_bits) || !ParseHex(*blocked, &blocked_bits)) {
    return std::nullopt;
  }
  return (own_bits | shared_bits) & ~blocked_bits;
}

absl::Status ReadMemory(pid_t pid, uint64_t address, void* buffer, size_t size) {
  struct iovec local = {buffer, size};
  struct iovec remote = {reinterpret_cast<void*>(address), size};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) {
    return absl::UnavailableError(absl::StrFormat("cannot read %zu bytes at 0x%x in pid %d: %s",
                                                  size, address, pid, strerror(errno)));
  }
  if (static_cast<size_t>(n) != size) {
    return absl::UnavailableError(
        absl::StrFormat("short read at 0x%x in pid %d (%zd of %zu bytes)", address, pid, n, size));
  }
  return absl::OkStatus();
}

absl::Status WriteMemoryForced(pid_t pid, uint64_t address, const void* data, size_t size) {
  int fd = open(absl::StrFormat("/proc/%d/mem", pid).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot open /proc/%d/mem: %s", pid, strerror(errno)));
  }
  const char* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, bytes + done, size - done, static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      return absl::UnavailableError(absl::StrFormat(
          "cannot write %zu bytes at 0x%x in pid %d through /proc/PID/mem: %s", size - done,
          address + done, pid, strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
}

int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SleepNanos(int64_t nanos) {
  if (nanos <= 0) return;
  struct timespec ts = {static_cast<time_t>(nanos / 1000000000), static_cast<long>(nanos % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace gpuos::inject
