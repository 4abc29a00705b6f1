// Function file offsets of an ELF library; see elf_function_offsets.h.
#include "record/elf_function_offsets.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gpuos {

absl::StatusOr<std::map<std::string, uint64_t>> ElfFunctionOffsets(
    const std::string& path, absl::FunctionRef<bool(absl::string_view)> wanted) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrFormat("cannot open %s: %s", path, strerror(errno)));
  }
  std::map<std::string, uint64_t> vaddrs;
  std::vector<GElf_Phdr> loads;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool is_elf = elf && elf_kind(elf) == ELF_K_ELF;
  if (is_elf) {
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) == 0) {
      for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr phdr;
        if (gelf_getphdr(elf, static_cast<int>(i), &phdr) && phdr.p_type == PT_LOAD) {
          loads.push_back(phdr);
        }
      }
    }
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_DYNSYM && shdr.sh_type != SHT_SYMTAB) ||
          shdr.sh_entsize == 0) {
        continue;
      }
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      size_t count = shdr.sh_size / shdr.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
            sym.st_value == 0) {
          continue;
        }
        const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
        if (name && wanted(name)) vaddrs.emplace(name, sym.st_value);
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  if (!is_elf) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is not an ELF shared library", path));
  }
  std::map<std::string, uint64_t> offsets;
  for (const auto& [name, vaddr] : vaddrs) {
    for (const GElf_Phdr& load : loads) {
      if (vaddr >= load.p_vaddr && vaddr < load.p_vaddr + load.p_filesz) {
        offsets[name] = vaddr - load.p_vaddr + load.p_offset;
        break;
      }
    }
  }
  return offsets;
}

}  // namespace gpuos
