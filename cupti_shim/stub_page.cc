// Locating the injector's stub thread; see stub_page.h.
#include "stub_page.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpuos_shim {
namespace {

std::vector<std::string_view> Fields(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

// "0x7f12..." (the kernel's format) or decimal; false if neither.
bool ParseNumber(std::string_view field, uint64_t* value) {
  std::string text(field);
  char* end = nullptr;
  errno = 0;
  *value = strtoull(text.c_str(), &end, 0);
  return errno == 0 && end != text.c_str() && *end == '\0';
}

}  // namespace

StubThreadPlace ClassifyStubThread(std::string_view syscall_text, uintptr_t page, size_t size) {
  std::vector<std::string_view> fields = Fields(syscall_text);
  if (fields.empty() || fields[0] == "running") return StubThreadPlace::kUnknown;
  uint64_t pc = 0;
  if (!ParseNumber(fields.back(), &pc)) return StubThreadPlace::kUnknown;
  const bool inside = pc >= page && pc - page < size;
  if (inside) return StubThreadPlace::kInside;
  // "-1 sp pc": stopped outside a system call (a signal stop, a ptrace
  // stop): the injector may still move it, so it does not count.
  if (fields[0] == "-1" || fields.size() != 9) return StubThreadPlace::kUnknown;
  return StubThreadPlace::kOutside;
}

StubThreadPlace LocateStubThread(int tid, uintptr_t page, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT || errno == ESRCH ? StubThreadPlace::kGone : StubThreadPlace::kUnknown;
  }
  char buffer[256];
  ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  int err = errno;
  close(fd);
  if (n < 0) return err == ESRCH ? StubThreadPlace::kGone : StubThreadPlace::kUnknown;
  return ClassifyStubThread(std::string_view(buffer, static_cast<size_t>(n)), page, size);
}

}  // namespace gpuos_shim
