// The exported (.dynsym) functions of a 64-bit ELF shared object, read from
// its file, and where its image starts: enough to find dlopen and friends in
// another process's C library without running code there.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace gpuos::inject {

struct ElfSymbol {
  uint64_t value = 0;  // address relative to the object's load bias
  bool is_ifunc = false;
  bool default_version = true;  // not a hidden (compat) symbol version
};

class ElfDynamicSymbols {
 public:
  // Reads an open file of an x86_64 ELF shared object or executable.
  static absl::StatusOr<ElfDynamicSymbols> Read(int fd, const std::string& name_for_errors);

  // A defined function or object by name; the default version when there
  // are several (dlopen@@GLIBC_2.34 over dlopen@GLIBC_2.2.5).
  std::optional<ElfSymbol> Find(const std::string& name) const;

  // The virtual address of the loadable segment that starts at file offset
  // 0: a mapping of that segment at address A means load bias A - this.
  uint64_t first_segment_vaddr() const { return first_segment_vaddr_; }

 private:
  std::map<std::string, ElfSymbol> symbols_;
  uint64_t first_segment_vaddr_ = 0;
};

// Checks that a file is a 64-bit x86_64 ELF shared object (what dlopen in a
// 64-bit x86_64 process can load); a message naming the file otherwise.
absl::Status CheckLoadableLibrary(int fd, const std::string& path);

}  // namespace gpuos::inject
