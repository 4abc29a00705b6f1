// The one ELF symbol reader; see elf_symbols.h.
#include "common/elf_symbols.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

#if defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
constexpr char kHostMachineName[] = "aarch64";
#else
constexpr uint16_t kHostMachine = EM_X86_64;
constexpr char kHostMachineName[] = "x86_64";
#endif

// A whole file mapped read-only: libraries run to hundreds of MB
// (libtorch_cpu), of which a symbol walk touches a few.
struct MappedFile {
  const char* data = nullptr;
  size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data) munmap(const_cast<char*>(data), size);
  }
};

absl::Status MapFile(int fd, const std::string& name, MappedFile* file) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::UnavailableError(absl::StrFormat("cannot stat %s: %s", name, strerror(errno)));
  }
  if (st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    return absl::FailedPreconditionError(absl::StrFormat("%s is not an ELF file", name));
  }
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    return absl::UnavailableError(absl::StrFormat("cannot read %s: %s", name, strerror(errno)));
  }
  file->data = static_cast<const char*>(map);
  file->size = static_cast<size_t>(st.st_size);
  return absl::OkStatus();
}

bool InBounds(const MappedFile& file, uint64_t offset, uint64_t size) {
  return offset <= file.size && size <= file.size - offset;
}

template <typename T>
T At(const MappedFile& file, uint64_t offset) {
  T value;
  memcpy(&value, file.data + offset, sizeof(T));
  return value;
}

absl::Status CheckHeader(const MappedFile& file, const std::string& name, Elf64_Ehdr* header) {
  if (memcmp(file.data, ELFMAG, SELFMAG) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("%s is not an ELF file", name));
  }
  *header = At<Elf64_Ehdr>(file, 0);
  if (header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_machine != kHostMachine) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is not a 64-bit %s ELF file", name, kHostMachineName));
  }
  return absl::OkStatus();
}

// One symbol table (.dynsym or .symtab) with its string table and, for
// .dynsym, its version table (null when absent).
struct SymbolTable {
  const Elf64_Shdr* symbols;
  const Elf64_Shdr* strings;
  const Elf64_Shdr* versions;
};

// The symbol's name, or empty when it does not fit in its string table.
absl::string_view SymbolName(const MappedFile& file, const Elf64_Shdr& strings, uint32_t at) {
  if (at >= strings.sh_size) return {};
  const char* start = file.data + strings.sh_offset + at;
  const size_t max_len = strings.sh_size - at;
  const size_t len = strnlen(start, max_len);
  return len == max_len ? absl::string_view() : absl::string_view(start, len);
}

void ReadTable(const MappedFile& file, const SymbolTable& table, const ElfReadOptions& options,
               std::map<std::string, ElfSymbol>* out) {
  const size_t count = table.symbols->sh_size / sizeof(Elf64_Sym);
  const bool have_versions = table.versions != nullptr &&
                             InBounds(file, table.versions->sh_offset, table.versions->sh_size) &&
                             table.versions->sh_size / sizeof(Elf64_Half) >= count;
  for (size_t i = 1; i < count; ++i) {
    const auto sym = At<Elf64_Sym>(file, table.symbols->sh_offset + i * sizeof(Elf64_Sym));
    const int type = ELF64_ST_TYPE(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT) continue;
    const absl::string_view name = SymbolName(file, *table.strings, sym.st_name);
    if (name.empty() || (options.wanted && !options.wanted(name))) continue;
    ElfSymbol entry;
    entry.value = sym.st_value;
    entry.is_function = type == STT_FUNC;
    entry.is_ifunc = type == STT_GNU_IFUNC;
    if (have_versions) {
      const auto version =
          At<Elf64_Half>(file, table.versions->sh_offset + i * sizeof(Elf64_Half));
      entry.default_version = (version & 0x8000) == 0;
    }
    auto it = out->find(std::string(name));
    if (it == out->end()) {
      out->emplace(std::string(name), entry);
    } else if (!it->second.default_version && entry.default_version) {
      it->second = entry;
    }
  }
}

}  // namespace

absl::StatusOr<ElfSymbols> ElfSymbols::Read(int fd, const std::string& name,
                                            const ElfReadOptions& options) {
  MappedFile file;
  if (absl::Status s = MapFile(fd, name, &file); !s.ok()) return s;
  Elf64_Ehdr eh{};
  if (absl::Status s = CheckHeader(file, name, &eh); !s.ok()) return s;

  ElfSymbols result;
  bool found_first_segment = false;
  if (eh.e_phentsize == sizeof(Elf64_Phdr) &&
      InBounds(file, eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    for (int i = 0; i < eh.e_phnum; ++i) {
      const auto ph = At<Elf64_Phdr>(file, eh.e_phoff + i * sizeof(Elf64_Phdr));
      if (ph.p_type != PT_LOAD) continue;
      result.segments_.push_back({ph.p_vaddr, ph.p_filesz, ph.p_offset});
      if (ph.p_offset == 0 && !found_first_segment) {
        result.first_segment_vaddr_ = ph.p_vaddr;
        found_first_segment = true;
      }
    }
  }
  if (!found_first_segment) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s has no loadable segment at file offset 0", name));
  }

  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !InBounds(file, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has no section headers", name));
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (size_t i = 0; i < sections.size(); ++i) {
    sections[i] = At<Elf64_Shdr>(file, eh.e_shoff + i * sizeof(Elf64_Shdr));
  }
  const Elf64_Shdr* versions = nullptr;
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type == SHT_GNU_versym) versions = &s;
  }
  bool read_dynamic = false;
  for (const Elf64_Shdr& s : sections) {
    const bool dynamic = s.sh_type == SHT_DYNSYM;
    if (!dynamic && !(s.sh_type == SHT_SYMTAB && options.full_symbol_table)) continue;
    if (s.sh_link >= sections.size() || s.sh_entsize != sizeof(Elf64_Sym) ||
        !InBounds(file, s.sh_offset, s.sh_size) ||
        !InBounds(file, sections[s.sh_link].sh_offset, sections[s.sh_link].sh_size)) {
      continue;
    }
    ReadTable(file, {&s, &sections[s.sh_link], dynamic ? versions : nullptr}, options,
              &result.symbols_);
    read_dynamic = read_dynamic || dynamic;
  }
  if (!read_dynamic && !options.full_symbol_table) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has no usable .dynsym", name));
  }
  return result;
}

std::optional<ElfSymbol> ElfSymbols::Find(const std::string& name) const {
  auto it = symbols_.find(name);
  if (it == symbols_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> ElfSymbols::FileOffset(uint64_t vaddr) const {
  for (const Segment& s : segments_) {
    if (vaddr >= s.vaddr && vaddr - s.vaddr < s.file_size) return vaddr - s.vaddr + s.offset;
  }
  return std::nullopt;
}

absl::StatusOr<std::map<std::string, uint64_t>> ElfFunctionOffsets(
    const std::string& path, absl::FunctionRef<bool(absl::string_view)> wanted) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrFormat("cannot open %s: %s", path, strerror(errno)));
  }
  ElfReadOptions options;
  options.full_symbol_table = true;
  options.wanted = [wanted](absl::string_view name) { return wanted(name); };
  absl::StatusOr<ElfSymbols> symbols = ElfSymbols::Read(fd, path, options);
  close(fd);
  if (!symbols.ok()) {
    return absl::InvalidArgumentError(symbols.status().message());
  }
  std::map<std::string, uint64_t> offsets;
  for (const auto& [name, symbol] : symbols->symbols()) {
    if (!symbol.is_function) continue;
    if (std::optional<uint64_t> offset = symbols->FileOffset(symbol.value)) offsets[name] = *offset;
  }
  return offsets;
}

absl::Status CheckLoadableLibrary(int fd, const std::string& path) {
  Elf64_Ehdr eh{};
  ssize_t n = pread(fd, &eh, sizeof(eh), 0);
  if (n < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot read library %s: %s", path, strerror(errno)));
  }
  if (static_cast<size_t>(n) < sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("library %s is not an ELF file", path));
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("library %s is not a 64-bit x86_64 ELF file", path));
  }
  if (eh.e_type != ET_DYN) {
    return absl::InvalidArgumentError(
        absl::StrFormat("library %s is not a shared object (ELF type %d)", path, eh.e_type));
  }
  return absl::OkStatus();
}

}  // namespace gpuos
