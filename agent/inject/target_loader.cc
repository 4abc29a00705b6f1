// Finding dlopen & co. in another process; see target_loader.h.
#include "inject/target_loader.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/elf_symbols.h"

namespace gpuos::inject {
namespace {

std::string BaseName(absl::string_view path) {
  absl::ConsumeSuffix(&path, " (deleted)");
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

bool IsCLibrary(const std::string& base) {
  return base == "libc.so.6" || absl::StartsWith(base, "libc-2.") ||
         absl::StartsWith(base, "ld-musl-") || absl::StartsWith(base, "libc.musl-");
}
bool IsLibdl(const std::string& base) {
  return absl::StartsWith(base, "libdl.so") || absl::StartsWith(base, "libdl-");
}
bool IsRuntimeObject(const std::string& base) {
  return IsCLibrary(base) || IsLibdl(base) || absl::StartsWith(base, "ld-linux") ||
         absl::StartsWith(base, "ld-2.") || absl::StartsWith(base, "libpthread");
}

// One mapped file: its first mapping (file offset 0) and the address range
// all its mappings cover.
struct MappedObject {
  const MemoryMapping* first = nullptr;
  uint64_t low = UINT64_MAX;
  uint64_t high = 0;
};

std::map<std::string, MappedObject> MappedObjects(const std::vector<MemoryMapping>& mappings) {
  std::map<std::string, MappedObject> objects;
  for (size_t i = 0; i < mappings.size(); ++i) {
    const MemoryMapping& m = mappings[i];
    if (m.path.empty() || m.path[0] != '/') continue;
    MappedObject& object = objects[m.path];
    if (m.offset == 0 && object.first == nullptr) object.first = &m;
    object.low = std::min(object.low, m.start);
    uint64_t high = m.end;
    // The .bss beyond the file's last page is an anonymous mapping right after.
    if (i + 1 < mappings.size() && mappings[i + 1].path.empty() &&
        mappings[i + 1].start == m.end && mappings[i + 1].inode == 0) {
      high = mappings[i + 1].end;
    }
    object.high = std::max(object.high, high);
  }
  return objects;
}

// Opens the file behind a mapping as the target sees it: map_files names
// the very file mapped (even if deleted or in another mount namespace);
// /proc/PID/root/PATH is the fallback when map_files is not allowed.
absl::StatusOr<int> OpenMappedFile(pid_t pid, const MemoryMapping& m) {
  std::string map_file = absl::StrFormat("/proc/%d/map_files/%x-%x", pid, m.start, m.end);
  int fd = open(map_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    absl::string_view path = m.path;
    absl::ConsumeSuffix(&path, " (deleted)");
    std::string rooted = absl::StrFormat("/proc/%d/root%s", pid, path);
    fd = open(rooted.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrFormat("cannot open %s of pid %d (%s): %s", m.path,
                                                    pid, map_file, strerror(errno)));
    }
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != m.inode) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s of pid %d changed on disk since the process mapped it", m.path, pid));
  }
  return fd;
}

absl::StatusOr<ElfSymbols> ReadSymbols(pid_t pid, const MemoryMapping& m) {
  auto fd = OpenMappedFile(pid, m);
  if (!fd.ok()) return fd.status();
  auto symbols = ElfSymbols::Read(*fd, m.path);
  close(*fd);
  return symbols;
}

uint64_t LoadBias(const MemoryMapping& first, const ElfSymbols& symbols) {
  return first.start - (symbols.first_segment_vaddr() & ~uint64_t{0xfff});
}

absl::StatusOr<uint64_t> FunctionAddress(const ElfSymbols& symbols, uint64_t bias,
                                         const std::string& name, const std::string& object,
                                         const std::vector<MemoryMapping>& mappings) {
  std::optional<ElfSymbol> symbol = symbols.Find(name);
  if (!symbol) {
    return absl::NotFoundError(absl::StrFormat("%s exports no %s", object, name));
  }
  if (symbol->is_ifunc) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s in %s is an indirect function; cannot call it directly", name, object));
  }
  uint64_t address = bias + symbol->value;
  const MemoryMapping* m = FindMapping(mappings, address);
  if (m == nullptr || !m->executable()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s of %s resolves to 0x%x, which is not executable memory of the process", name, object,
        address));
  }
  return address;
}

std::optional<uint64_t> FindSyscallBytes(pid_t pid, uint64_t start, size_t size) {
  std::string bytes(size, '\0');
  if (!ReadMemory(pid, start, bytes.data(), size).ok()) return std::nullopt;
  for (size_t i = 0; i + 1 < size; ++i) {
    if (static_cast<unsigned char>(bytes[i]) == 0x0f && static_cast<unsigned char>(bytes[i + 1]) == 0x05) {
      return start + i;
    }
  }
  return std::nullopt;
}

// A `syscall` instruction in the C library's code: the syscall() wrapper
// holds one; else any in its executable mappings.
std::optional<uint64_t> FindSyscallInstruction(pid_t pid, const ElfSymbols& libc_symbols,
                                               uint64_t libc_bias, const std::string& libc_path,
                                               const std::vector<MemoryMapping>& mappings) {
  std::optional<uint64_t> instruction;
  if (auto wrapper = FunctionAddress(libc_symbols, libc_bias, "syscall", libc_path, mappings);
      wrapper.ok()) {
    instruction = FindSyscallBytes(pid, *wrapper, 64);
  }
  for (const MemoryMapping& m : mappings) {
    if (instruction) break;
    if (m.path == libc_path && m.executable() && m.readable()) {
      instruction = FindSyscallBytes(pid, m.start, std::min<uint64_t>(m.end - m.start, 1 << 20));
    }
  }
  return instruction;
}

}  // namespace

bool InRanges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t address) {
  for (const auto& [low, high] : ranges) {
    if (address >= low && address < high) return true;
  }
  return false;
}

absl::StatusOr<TargetLoader> FindTargetLoader(pid_t pid) {
  auto mappings = ReadMappings(pid);
  if (!mappings.ok()) return mappings.status();
  std::map<std::string, MappedObject> objects = MappedObjects(*mappings);

  TargetLoader loader;
  const MappedObject* libc = nullptr;
  const MappedObject* libdl = nullptr;
  for (const auto& [path, object] : objects) {
    const std::string base = BaseName(path);
    if (IsRuntimeObject(base)) loader.runtime_ranges.emplace_back(object.low, object.high);
    if (object.first == nullptr) continue;
    if (IsCLibrary(base) && libc == nullptr) libc = &object;
    if (IsLibdl(base) && libdl == nullptr) libdl = &object;
  }
  if (libc == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no C library is mapped in pid %d (a statically linked program?): nothing to call dlopen "
        "with",
        pid));
  }
  loader.libc_path = libc->first->path;

  auto libc_symbols = ReadSymbols(pid, *libc->first);
  if (!libc_symbols.ok()) return libc_symbols.status();
  const uint64_t libc_bias = LoadBias(*libc->first, *libc_symbols);

  // glibc >= 2.34 (and musl) have the dl* functions in the C library;
  // older glibc only in libdl.so.2, which the process may not have loaded.
  const ElfSymbols* dl_symbols = &*libc_symbols;
  uint64_t dl_bias = libc_bias;
  std::string dl_object = loader.libc_path;
  std::optional<ElfSymbols> libdl_symbols;
  if (!libc_symbols->Find("dlopen")) {
    if (libdl == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "pid %d's C library (%s) has no dlopen (glibc older than 2.34) and libdl.so.2 is not "
          "loaded",
          pid, loader.libc_path));
    }
    auto read = ReadSymbols(pid, *libdl->first);
    if (!read.ok()) return read.status();
    libdl_symbols = std::move(*read);
    dl_symbols = &*libdl_symbols;
    dl_bias = LoadBias(*libdl->first, *libdl_symbols);
    dl_object = libdl->first->path;
  }
  struct Wanted {
    const char* name;
    uint64_t* out;
  } wanted[] = {{"dlopen", &loader.dlopen},
                {"dlsym", &loader.dlsym},
                {"dlerror", &loader.dlerror},
                {"dlclose", &loader.dlclose}};
  for (const Wanted& w : wanted) {
    auto address = FunctionAddress(*dl_symbols, dl_bias, w.name, dl_object, *mappings);
    if (!address.ok()) return address.status();
    *w.out = *address;
  }

  std::optional<uint64_t> instruction =
      FindSyscallInstruction(pid, *libc_symbols, libc_bias, loader.libc_path, *mappings);
  if (!instruction) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "found no syscall instruction in pid %d's C library %s", pid, loader.libc_path));
  }
  loader.syscall_instruction = *instruction;
  return loader;
}

}  // namespace gpuos::inject
