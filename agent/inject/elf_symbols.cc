// .dynsym reading for the injector; see elf_symbols.h.
#include "inject/elf_symbols.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gpuos::inject {
namespace {

absl::StatusOr<std::string> ReadWholeFile(int fd, const std::string& name) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::UnavailableError(absl::StrFormat("cannot stat %s: %s", name, strerror(errno)));
  }
  // C libraries are a few MB; anything far larger is not what we expect.
  if (st.st_size <= 0 || st.st_size > (256ll << 20)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s has an unexpected size (%lld bytes)", name, (long long)st.st_size));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = pread(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrFormat("cannot read %s: %s", name,
                                                    n < 0 ? strerror(errno) : "short file"));
    }
    done += static_cast<size_t>(n);
  }
  return data;
}

bool InBounds(const std::string& data, uint64_t offset, uint64_t size) {
  return offset <= data.size() && size <= data.size() - offset;
}

absl::Status CheckHeader(const std::string& data, const std::string& name, Elf64_Ehdr* header) {
  if (data.size() < sizeof(Elf64_Ehdr) || memcmp(data.data(), ELFMAG, SELFMAG) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("%s is not an ELF file", name));
  }
  memcpy(header, data.data(), sizeof(*header));
  if (header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_machine != EM_X86_64) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is not a 64-bit x86_64 ELF file", name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ElfDynamicSymbols> ElfDynamicSymbols::Read(int fd, const std::string& name) {
  auto data = ReadWholeFile(fd, name);
  if (!data.ok()) return data.status();
  Elf64_Ehdr eh;
  if (absl::Status s = CheckHeader(*data, name, &eh); !s.ok()) return s;

  ElfDynamicSymbols result;
  bool found_first_segment = false;
  if (eh.e_phentsize == sizeof(Elf64_Phdr) &&
      InBounds(*data, eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    for (int i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      memcpy(&ph, data->data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
      if (ph.p_type == PT_LOAD && ph.p_offset == 0) {
        result.first_segment_vaddr_ = ph.p_vaddr;
        found_first_segment = true;
        break;
      }
    }
  }
  if (!found_first_segment) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s has no loadable segment at file offset 0", name));
  }

  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !InBounds(*data, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has no section headers", name));
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (eh.e_shnum > 0) {
    memcpy(sections.data(), data->data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  }
  const Elf64_Shdr* dynsym = nullptr;
  const Elf64_Shdr* versym = nullptr;
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type == SHT_DYNSYM) dynsym = &s;
    if (s.sh_type == SHT_GNU_versym) versym = &s;
  }
  if (dynsym == nullptr || dynsym->sh_link >= sections.size() ||
      dynsym->sh_entsize != sizeof(Elf64_Sym) ||
      !InBounds(*data, dynsym->sh_offset, dynsym->sh_size)) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has no usable .dynsym", name));
  }
  const Elf64_Shdr& strtab = sections[dynsym->sh_link];
  if (!InBounds(*data, strtab.sh_offset, strtab.sh_size)) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has a damaged .dynstr", name));
  }
  const size_t count = dynsym->sh_size / sizeof(Elf64_Sym);
  const bool have_versions = versym != nullptr &&
                             InBounds(*data, versym->sh_offset, versym->sh_size) &&
                             versym->sh_size / sizeof(Elf64_Half) >= count;
  for (size_t i = 1; i < count; ++i) {
    Elf64_Sym sym;
    memcpy(&sym, data->data() + dynsym->sh_offset + i * sizeof(Elf64_Sym), sizeof(sym));
    const int type = ELF64_ST_TYPE(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT) continue;
    if (sym.st_name >= strtab.sh_size) continue;
    const char* start = data->data() + strtab.sh_offset + sym.st_name;
    const size_t max_len = strtab.sh_size - sym.st_name;
    const size_t len = strnlen(start, max_len);
    if (len == max_len) continue;
    ElfSymbol entry;
    entry.value = sym.st_value;
    entry.is_ifunc = type == STT_GNU_IFUNC;
    if (have_versions) {
      Elf64_Half version;
      memcpy(&version, data->data() + versym->sh_offset + i * sizeof(Elf64_Half), sizeof(version));
      entry.default_version = (version & 0x8000) == 0;
    }
    std::string symbol_name(start, len);
    auto it = result.symbols_.find(symbol_name);
    if (it == result.symbols_.end() || (!it->second.default_version && entry.default_version)) {
      result.symbols_[symbol_name] = entry;
    }
  }
  return result;
}

std::optional<ElfSymbol> ElfDynamicSymbols::Find(const std::string& name) const {
  auto it = symbols_.find(name);
  if (it == symbols_.end()) return std::nullopt;
  return it->second;
}

absl::Status CheckLoadableLibrary(int fd, const std::string& path) {
  Elf64_Ehdr eh;
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

}  // namespace gpuos::inject
