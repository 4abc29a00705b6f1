// Rewriting GOT slots of loaded objects; see import_redirect.h.
#include "import_redirect.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gpuos_shim {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_X86_64_64;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_AARCH64_ABS64;
#endif

struct Mapping {
  uintptr_t start, end;
  int prot;
};

// This process's mappings, to learn a slot's protection before writing it.
std::vector<Mapping> ReadMappings() {
  std::vector<Mapping> mappings;
  FILE* maps = fopen("/proc/self/maps", "re");
  if (maps == nullptr) return mappings;
  char line[512];
  while (fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3) continue;
    int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
               (perms[2] == 'x' ? PROT_EXEC : 0);
    mappings.push_back({start, end, prot});
  }
  fclose(maps);
  return mappings;
}

struct Search {
  const char* symbol;
  void* replacement;
  uintptr_t keep_base;  // our own object's load base
  std::vector<Mapping> mappings;
  uintptr_t page_size;
  size_t rewritten = 0;
};

// Points one slot at the replacement.  Runs inside dl_iterate_phdr, whose
// loader lock keeps the object from being unloaded under the write.
void Rewrite(uintptr_t slot, Search* search) {
  if (slot % sizeof(void*) != 0) return;
  const Mapping* mapping = nullptr;
  for (const Mapping& m : search->mappings) {
    if (slot >= m.start && slot + sizeof(void*) <= m.end) mapping = &m;
  }
  // Unmapped or unreadable when we looked: not a slot we understand.
  if (mapping == nullptr || (mapping->prot & PROT_READ) == 0) return;
  auto* target = reinterpret_cast<void**>(slot);
  if (*target == search->replacement) return;
  void* page = reinterpret_cast<void*>(slot & ~(search->page_size - 1));
  const bool writable = (mapping->prot & PROT_WRITE) != 0;
  if (!writable && mprotect(page, search->page_size, mapping->prot | PROT_WRITE) != 0) return;
  __atomic_store_n(target, search->replacement, __ATOMIC_RELEASE);
  if (!writable) mprotect(page, search->page_size, mapping->prot);
  ++search->rewritten;
}

#if defined(__x86_64__) || defined(__aarch64__)
// glibc stores most d_ptr values relocated; a few loaders do not.
uintptr_t Absolute(uintptr_t base, ElfW(Addr) pointer) {
  return pointer < base ? base + pointer : pointer;
}

void ScanRelocations(const ElfW(Rela)* relocations, size_t bytes, const ElfW(Sym)* symbols,
                     const char* strings, uintptr_t base, Search* search) {
  if (relocations == nullptr || symbols == nullptr || strings == nullptr) return;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& r = relocations[i];
    const uint32_t type = ELF64_R_TYPE(r.r_info);
    if (type != kJumpSlot && type != kGlobDat && type != kAbsolute) continue;
    const ElfW(Sym)& sym = symbols[ELF64_R_SYM(r.r_info)];
    // Only imports (undefined here) are ours to redirect.
    if (sym.st_shndx != SHN_UNDEF) continue;
    if (strcmp(strings + sym.st_name, search->symbol) != 0) continue;
    Rewrite(base + r.r_offset, search);
  }
}

int VisitObject(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  const uintptr_t base = info->dlpi_addr;
  if (base == search->keep_base) return 0;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dynamic == nullptr) return 0;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* plt = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t plt_bytes = 0, rela_bytes = 0;
  bool plt_is_rela = true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = reinterpret_cast<const ElfW(Sym)*>(Absolute(base, d->d_un.d_ptr)); break;
      case DT_STRTAB: strings = reinterpret_cast<const char*>(Absolute(base, d->d_un.d_ptr)); break;
      case DT_JMPREL: plt = reinterpret_cast<const ElfW(Rela)*>(Absolute(base, d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: plt_bytes = d->d_un.d_val; break;
      case DT_PLTREL: plt_is_rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(Absolute(base, d->d_un.d_ptr)); break;
      case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
      default: break;
    }
  }
  if (plt_is_rela) ScanRelocations(plt, plt_bytes, symbols, strings, base, search);
  ScanRelocations(rela, rela_bytes, symbols, strings, base, search);
  return 0;
}
#endif

}  // namespace

size_t RedirectImports(const char* symbol, void* replacement, const void* keep_object_address) {
#if defined(__x86_64__) || defined(__aarch64__)
  Dl_info ours{};
  if (dladdr(keep_object_address, &ours) == 0) return 0;
  Search search{symbol, replacement, reinterpret_cast<uintptr_t>(ours.dli_fbase), ReadMappings(),
                static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))};
  dl_iterate_phdr(VisitObject, &search);
  return search.rewritten;
#else
  (void)symbol;
  (void)replacement;
  (void)keep_object_address;
  return 0;
#endif
}

}  // namespace gpuos_shim
