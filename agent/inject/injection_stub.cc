// The injection stub's machine code and its data page; see injection_stub.h.
#include "inject/injection_stub.h"

#include <cpuid.h>
#include <dlfcn.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "inject/remote_process.h"

// Data page layout, shared by the assembly below and the C++ that fills
// and reads it.  Offsets from the start of the data page.
#define STUB_STATE 0          // u32 StubState
#define STUB_TID 4            // u32, written by the stub
#define STUB_RETURN_RIP 8     // u64
#define STUB_DLOPEN 16        // u64 function addresses in the target
#define STUB_DLSYM 24
#define STUB_DLERROR 32
#define STUB_DLCLOSE 40
#define STUB_XSAVE_MASK 48    // u64 (edx:eax of XSAVE/XRSTOR)
#define STUB_USE_XSAVE 56     // u32: 0 = FXSAVE
#define STUB_DLOPEN_FLAGS 60  // u32
#define STUB_XSAVE_SIZE 64    // u64
#define STUB_MAP_SIZE 72      // u64
#define STUB_HANDLE 80        // u64, written by the stub
#define STUB_ENTRY 88         // u64, written by the stub
#define STUB_COOKIE 96        // u64: tells our page from a later mapping at its address
#define STUB_PATH 128         // char[1024]
#define STUB_SYMBOL 1152      // char[256]
#define STUB_ARGUMENT 1408    // char[2048]
#define STUB_ERROR 3456       // char[512], written by the stub
#define STUB_DATA_END 3968

#define STUB_STR2(x) #x
#define STUB_STR(x) STUB_STR2(x)
#define F(name) STUB_STR(name) "(%r12)"

// Kept in .rodata: in gpuos-trace these are bytes to copy, never to run.
// Only local labels and %rip-relative addressing inside one section, so the
// bytes carry no relocation and run at any address.
asm(".pushsection .rodata.gpuos_inject_stub,\"a\",@progbits\n"
    ".balign 64\n"
    ".globl gpuos_inject_stub_begin\n"
    ".hidden gpuos_inject_stub_begin\n"
    "gpuos_inject_stub_begin:\n"
    ".Lgpuos_stub_base:\n"
    // The interrupted code may keep data in the 128 bytes below %rsp.
    "  leaq -128(%rsp), %rsp\n"
    "  pushfq\n"
    "  pushq %rax\n"
    "  pushq %rbx\n"
    "  pushq %rcx\n"
    "  pushq %rdx\n"
    "  pushq %rsi\n"
    "  pushq %rdi\n"
    "  pushq %rbp\n"
    "  pushq %r8\n"
    "  pushq %r9\n"
    "  pushq %r10\n"
    "  pushq %r11\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    // Calls want DF clear (the ABI) and AC clear (unaligned accesses must
    // not fault); the flags were saved above.  IF is not ours to change,
    // and popfq leaves it alone.
    "  pushq $2\n"
    "  popfq\n"
    "  leaq .Lgpuos_stub_base(%rip), %rbx\n"
    "  leaq 4096(%rbx), %r12\n"
    // mprotect(data page, 4096, PROT_READ|PROT_WRITE); on failure the stub
    // cannot report anything, and leaves quietly.
    "  movq %r12, %rdi\n"
    "  movl $4096, %esi\n"
    "  movl $3, %edx\n"
    "  movl $10, %eax\n"
    "  syscall\n"
    "  testq %rax, %rax\n"
    "  jnz .Lgpuos_stub_restore_gprs\n"
    "  movl $1, " F(STUB_STATE) "\n"
    "  movl $186, %eax\n"  // gettid
    "  syscall\n"
    "  movl %eax, " F(STUB_TID) "\n"
    "  movl %eax, %r14d\n"
    // Vector state save area, 64-byte aligned below the pushed registers.
    "  movq %rsp, %rbp\n"
    "  subq " F(STUB_XSAVE_SIZE) ", %rsp\n"
    "  andq $-64, %rsp\n"
    // XRSTOR faults unless the XSAVE header's reserved bytes are zero, and
    // XSAVE writes only XSTATE_BV.
    "  xorl %eax, %eax\n"
    "  movq %rax, 512(%rsp)\n"
    "  movq %rax, 520(%rsp)\n"
    "  movq %rax, 528(%rsp)\n"
    "  movq %rax, 536(%rsp)\n"
    "  movq %rax, 544(%rsp)\n"
    "  movq %rax, 552(%rsp)\n"
    "  movq %rax, 560(%rsp)\n"
    "  movq %rax, 568(%rsp)\n"
    "  movl " F(STUB_XSAVE_MASK) ", %eax\n"
    "  movl " STUB_STR(STUB_XSAVE_MASK) "+4(%r12), %edx\n"
    "  cmpl $0, " F(STUB_USE_XSAVE) "\n"
    "  je 1f\n"
    "  xsave64 (%rsp)\n"
    "  jmp 2f\n"
    "1:\n"
    "  fxsave64 (%rsp)\n"
    "2:\n"
    "  movq %rsp, %r13\n"
    // handle = dlopen(path, flags)
    "  leaq " F(STUB_PATH) ", %rdi\n"
    "  movl " F(STUB_DLOPEN_FLAGS) ", %esi\n"
    "  callq *" F(STUB_DLOPEN) "\n"
    "  movq %rax, " F(STUB_HANDLE) "\n"
    "  testq %rax, %rax\n"
    "  jz .Lgpuos_stub_failed\n"
    // entry = dlsym(handle, symbol)
    "  movq %rax, %rdi\n"
    "  leaq " F(STUB_SYMBOL) ", %rsi\n"
    "  callq *" F(STUB_DLSYM) "\n"
    "  movq %rax, " F(STUB_ENTRY) "\n"
    "  testq %rax, %rax\n"
    "  jz .Lgpuos_stub_failed\n"
    // entry(argument, page, size, tid)
    "  leaq " F(STUB_ARGUMENT) ", %rdi\n"
    "  movq %rbx, %rsi\n"
    "  movq " F(STUB_MAP_SIZE) ", %rdx\n"
    "  movl %r14d, %ecx\n"
    "  callq *%rax\n"
    "  movl $2, %r15d\n"
    "  jmp .Lgpuos_stub_restore_fpu\n"
    ".Lgpuos_stub_failed:\n"
    // Copy dlerror()'s text now: dlclose may free its buffer.
    "  callq *" F(STUB_DLERROR) "\n"
    "  leaq " F(STUB_ERROR) ", %rdi\n"
    "  testq %rax, %rax\n"
    "  jz 4f\n"
    "  movl $511, %ecx\n"
    "3:\n"
    "  movb (%rax), %dl\n"
    "  testb %dl, %dl\n"
    "  jz 4f\n"
    "  movb %dl, (%rdi)\n"
    "  incq %rax\n"
    "  incq %rdi\n"
    "  decl %ecx\n"
    "  jnz 3b\n"
    "4:\n"
    "  movb $0, (%rdi)\n"
    "  movq " F(STUB_HANDLE) ", %rdi\n"
    "  testq %rdi, %rdi\n"
    "  jz 5f\n"
    "  callq *" F(STUB_DLCLOSE) "\n"
    "5:\n"
    "  movl $3, %r15d\n"
    ".Lgpuos_stub_restore_fpu:\n"
    "  movq %r13, %rsp\n"
    "  movl " F(STUB_XSAVE_MASK) ", %eax\n"
    "  movl " STUB_STR(STUB_XSAVE_MASK) "+4(%r12), %edx\n"
    "  cmpl $0, " F(STUB_USE_XSAVE) "\n"
    "  je 6f\n"
    "  xrstor64 (%rsp)\n"
    "  jmp 7f\n"
    "6:\n"
    "  fxrstor64 (%rsp)\n"
    "7:\n"
    "  movq %rbp, %rsp\n"
    "  movl %r15d, " F(STUB_STATE) "\n"
    ".Lgpuos_stub_restore_gprs:\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %r11\n"
    "  popq %r10\n"
    "  popq %r9\n"
    "  popq %r8\n"
    "  popq %rbp\n"
    "  popq %rdi\n"
    "  popq %rsi\n"
    "  popq %rdx\n"
    "  popq %rcx\n"
    "  popq %rbx\n"
    "  popq %rax\n"
    "  popfq\n"
    "  leaq 128(%rsp), %rsp\n"
    "  jmpq *(.Lgpuos_stub_base + 4096 + " STUB_STR(STUB_RETURN_RIP) ")(%rip)\n"
    ".globl gpuos_inject_stub_end\n"
    ".hidden gpuos_inject_stub_end\n"
    "gpuos_inject_stub_end:\n"
    ".popsection\n");

extern "C" const char gpuos_inject_stub_begin[];
extern "C" const char gpuos_inject_stub_end[];

namespace gpuos::inject {
namespace {

void Put64(char* data, int offset, uint64_t value) { memcpy(data + offset, &value, sizeof(value)); }
void Put32(char* data, int offset, uint32_t value) { memcpy(data + offset, &value, sizeof(value)); }

absl::Status PutString(char* data, int offset, int capacity, const std::string& text,
                       const char* what) {
  if (text.size() >= static_cast<size_t>(capacity) || text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is too long for the injection stub (%zu bytes, at most %d)", what, text.size(),
        capacity - 1));
  }
  memcpy(data + offset, text.data(), text.size());
  data[offset + text.size()] = '\0';
  return absl::OkStatus();
}

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  asm volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

}  // namespace

static_assert(STUB_DATA_END <= 4096, "the stub's data must fit its page");

CpuStateSave ProbeCpuStateSave() {
  CpuStateSave save;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return save;
  const uint64_t kAmxTiles = (uint64_t{1} << 17) | (uint64_t{1} << 18);
  save.use_xsave = true;
  save.xsave_mask = ReadXcr0() & ~kAmxTiles;
  uint64_t size = 576;  // legacy area + XSAVE header
  for (int i = 2; i < 63; ++i) {
    if ((save.xsave_mask >> i & 1) == 0) continue;
    __cpuid_count(0xd, i, eax, ebx, ecx, edx);
    // eax: the component's size, ebx: its offset in the standard format.
    size = std::max<uint64_t>(size, uint64_t{ebx} + eax);
  }
  save.area_size = (size + 63) & ~uint64_t{63};
  return save;
}

absl::StatusOr<std::string> BuildStubImage(const StubParameters& p) {
  const size_t code_size = static_cast<size_t>(gpuos_inject_stub_end - gpuos_inject_stub_begin);
  if (code_size == 0 || code_size > kStubDataOffset) {
    return absl::InternalError("the injection stub does not fit its page");
  }
  std::string image(kStubMapSize, '\0');
  memcpy(image.data(), gpuos_inject_stub_begin, code_size);
  char* data = image.data() + kStubDataOffset;
  Put32(data, STUB_STATE, static_cast<uint32_t>(StubState::kNotStarted));
  Put64(data, STUB_RETURN_RIP, p.return_rip);
  Put64(data, STUB_DLOPEN, p.dlopen);
  Put64(data, STUB_DLSYM, p.dlsym);
  Put64(data, STUB_DLERROR, p.dlerror);
  Put64(data, STUB_DLCLOSE, p.dlclose);
  Put64(data, STUB_XSAVE_MASK, p.cpu_state.xsave_mask);
  Put32(data, STUB_USE_XSAVE, p.cpu_state.use_xsave ? 1 : 0);
  Put32(data, STUB_DLOPEN_FLAGS, RTLD_NOW);
  Put64(data, STUB_XSAVE_SIZE, std::max<uint64_t>(p.cpu_state.area_size, 576));
  Put64(data, STUB_MAP_SIZE, kStubMapSize);
  Put64(data, STUB_COOKIE, p.cookie);
  if (absl::Status s = PutString(data, STUB_PATH, 1024, p.library_path, "the library path");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = PutString(data, STUB_SYMBOL, 256, p.entry_symbol, "the entry symbol");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = PutString(data, STUB_ARGUMENT, 2048, p.argument, "the entry argument");
      !s.ok()) {
    return s;
  }
  return image;
}

absl::StatusOr<StubProgress> ReadStubProgress(pid_t pid, uint64_t map_address,
                                              uint64_t cookie) {
  char header[STUB_COOKIE + 8];
  if (absl::Status s = ReadMemory(pid, map_address + kStubDataOffset, header, sizeof(header));
      !s.ok()) {
    return s;
  }
  uint32_t state, tid;
  uint64_t found_cookie;
  memcpy(&state, header + STUB_STATE, sizeof(state));
  memcpy(&tid, header + STUB_TID, sizeof(tid));
  memcpy(&found_cookie, header + STUB_COOKIE, sizeof(found_cookie));
  if (found_cookie != cookie) {
    return absl::NotFoundError(
        absl::StrFormat("the memory at 0x%x in pid %d is no longer the stub's", map_address, pid));
  }
  StubProgress progress;
  progress.state = static_cast<StubState>(state);
  progress.tid = static_cast<pid_t>(tid);
  if (progress.state == StubState::kLoadFailed) {
    char error[512];
    if (ReadMemory(pid, map_address + kStubDataOffset + STUB_ERROR, error, sizeof(error)).ok()) {
      progress.error.assign(error, strnlen(error, sizeof(error)));
    }
  }
  return progress;
}

}  // namespace gpuos::inject
