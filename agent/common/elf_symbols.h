// The one ELF symbol reader: the defined symbols of a 64-bit ELF file of
// this machine's architecture, read from the file (mapped, never run), and
// where its loadable segments lie.  The injector finds dlopen and friends in
// another process's C library with it (dynamic symbols, load bias); the
// uprobes find the file offsets of libcuda's and libtorch's functions
// (ElfFunctionOffsets).  Every table and string is bounds-checked: a damaged
// file gives an error, never a read past its end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuos {

struct ElfSymbol {
  uint64_t value = 0;  // address relative to the object's load bias
  bool is_function = false;  // STT_FUNC (an indirect function is not)
  bool is_ifunc = false;
  bool default_version = true;  // not a hidden (compat) symbol version
};

struct ElfReadOptions {
  // Also the full symbol table (.symtab) where the file keeps one; the
  // dynamic one (.dynsym) alone otherwise, which is what other objects can
  // link against.
  bool full_symbol_table = false;
  // Keeps only the symbols whose names it accepts (null: every one), so a
  // large library's table is not copied whole.
  std::function<bool(absl::string_view)> wanted;
};

class ElfSymbols {
 public:
  // Reads the defined functions and objects of an open ELF file.
  static absl::StatusOr<ElfSymbols> Read(int fd, const std::string& name_for_errors,
                                         const ElfReadOptions& options = {});

  // A defined function or object by name; the default version when there
  // are several (dlopen@@GLIBC_2.34 over dlopen@GLIBC_2.2.5).
  std::optional<ElfSymbol> Find(const std::string& name) const;
  const std::map<std::string, ElfSymbol>& symbols() const { return symbols_; }

  // The virtual address of the loadable segment that starts at file offset
  // 0: a mapping of that segment at address A means load bias A - this.
  uint64_t first_segment_vaddr() const { return first_segment_vaddr_; }

  // The file offset of virtual address `vaddr` (what uprobes are placed
  // by); none when no loadable segment holds it in the file.
  std::optional<uint64_t> FileOffset(uint64_t vaddr) const;

 private:
  struct Segment {
    uint64_t vaddr, file_size, offset;
  };
  std::map<std::string, ElfSymbol> symbols_;
  std::vector<Segment> segments_;
  uint64_t first_segment_vaddr_ = 0;
};

// File offset by symbol name of every defined function of the ELF file at
// `path` whose name `wanted` accepts, from its dynamic symbol table and,
// where present, the full one (libcuda is stripped of the latter).  Empty
// when none is accepted; an error when the file cannot be read or is not
// ELF.
absl::StatusOr<std::map<std::string, uint64_t>> ElfFunctionOffsets(
    const std::string& path, absl::FunctionRef<bool(absl::string_view)> wanted);

// Checks that a file is a 64-bit x86_64 ELF shared object (what dlopen in a
// 64-bit x86_64 process can load); a message naming the file otherwise.
absl::Status CheckLoadableLibrary(int fd, const std::string& path);

}  // namespace gpuos
