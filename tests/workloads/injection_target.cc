// A process for library_injection_test to inject into, which notices if the
// injection disturbs it.  Its main thread loops on one blocking syscall
// (--mode nanosleep | futex | futex_timeout | select | busy) issued from
// assembly with every general register, the flags (DF set) and every
// xmm/ymm/zmm and k register holding known values, and checks all of them
// after each return: the injector borrows exactly this thread, so anything
// its stub fails to restore shows up here.  Helper threads meanwhile play
// mutex/condvar ping-pong, churn malloc, spin on register-checked getpid
// calls and (for the futex modes) wake the main thread.  --signals adds a
// 2 ms SIGALRM timer.  Prints "ready" (and writes --ready-file, if given)
// once running; when --stop-file
// appears, prints "ok ..." and exits 0, or "CORRUPTED: ..." and exits 1 at
// the first bad value.
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cpuid.h>
#include <cstddef>
#include <string>

namespace {

// Shared with the assembly below: keep the offsets in step.
struct alignas(64) CheckedCall {
  uint64_t nr;          // 0
  uint64_t args[6];     // 8: rdi rsi rdx r10 r8 r9
  uint64_t keep[6];     // 56: rbx rbp r12 r13 r14 r15
  uint64_t flags_in;    // 104
  uint64_t vec_mode;    // 112: 0 none, 1 xmm0-15, 2 ymm0-15, 3 zmm0-31 + k0-7
  uint64_t pad0;        // 120
  uint64_t rax_out;     // 128
  uint64_t args_out[6];  // 136
  uint64_t keep_out[6];  // 184
  uint64_t flags_out;   // 232
  uint64_t pad1[2];     // 240
  uint8_t vec_in[32][64];   // 256
  uint8_t vec_out[32][64];  // 2304
  uint64_t k_in[8];     // 4352
  uint64_t k_out[8];    // 4416
};
static_assert(offsetof(CheckedCall, rax_out) == 128, "layout");
static_assert(offsetof(CheckedCall, flags_out) == 232, "layout");
static_assert(offsetof(CheckedCall, vec_in) == 256, "layout");
static_assert(offsetof(CheckedCall, vec_out) == 2304, "layout");
static_assert(offsetof(CheckedCall, k_in) == 4352, "layout");
static_assert(offsetof(CheckedCall, k_out) == 4416, "layout");

}  // namespace

extern "C" void checked_syscall(CheckedCall* call);

#define VEC_LOAD_XMM(i) "  movdqu " #i "*64+256(%rdi), %xmm" #i "\n"
#define VEC_LOAD_YMM(i) "  vmovdqu " #i "*64+256(%rdi), %ymm" #i "\n"
#define VEC_LOAD_ZMM(i) "  vmovdqu64 " #i "*64+256(%rdi), %zmm" #i "\n"
#define VEC_STORE_XMM(i) "  movdqu %xmm" #i ", " #i "*64+2304(%rdi)\n"
#define VEC_STORE_YMM(i) "  vmovdqu %ymm" #i ", " #i "*64+2304(%rdi)\n"
#define VEC_STORE_ZMM(i) "  vmovdqu64 %zmm" #i ", " #i "*64+2304(%rdi)\n"
#define K_LOAD(i) "  kmovq " #i "*8+4352(%rdi), %k" #i "\n"
#define K_STORE(i) "  kmovq %k" #i ", " #i "*8+4416(%rdi)\n"
#define X16(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define X32(M) X16(M) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31)
#define X8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

asm(".text\n"
    ".globl checked_syscall\n"
    ".type checked_syscall,@function\n"
    "checked_syscall:\n"
    "  pushq %rbx\n"
    "  pushq %rbp\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  pushq %rdi\n"
    "  movq 112(%rdi), %rax\n"
    "  cmpq $3, %rax\n"
    "  je 3f\n"
    "  cmpq $2, %rax\n"
    "  je 2f\n"
    "  cmpq $1, %rax\n"
    "  je 1f\n"
    "  jmp 4f\n"
    "1:\n" X16(VEC_LOAD_XMM) "  jmp 4f\n"
    "2:\n" X16(VEC_LOAD_YMM) "  jmp 4f\n"
    "3:\n" X32(VEC_LOAD_ZMM) X8(K_LOAD)
    "4:\n"
    "  movq 56(%rdi), %rbx\n"
    "  movq 64(%rdi), %rbp\n"
    "  movq 72(%rdi), %r12\n"
    "  movq 80(%rdi), %r13\n"
    "  movq 88(%rdi), %r14\n"
    "  movq 96(%rdi), %r15\n"
    "  pushq 104(%rdi)\n"
    "  movq 0(%rdi), %rax\n"
    "  movq 16(%rdi), %rsi\n"
    "  movq 24(%rdi), %rdx\n"
    "  movq 32(%rdi), %r10\n"
    "  movq 40(%rdi), %r8\n"
    "  movq 48(%rdi), %r9\n"
    "  movq 8(%rdi), %rdi\n"
    "  popfq\n"
    "  syscall\n"
    "  pushfq\n"
    "  pushq %rdi\n"
    "  movq 16(%rsp), %rdi\n"
    "  popq 136(%rdi)\n"
    "  popq 232(%rdi)\n"
    "  cld\n"
    "  movq %rax, 128(%rdi)\n"
    "  movq %rsi, 144(%rdi)\n"
    "  movq %rdx, 152(%rdi)\n"
    "  movq %r10, 160(%rdi)\n"
    "  movq %r8, 168(%rdi)\n"
    "  movq %r9, 176(%rdi)\n"
    "  movq %rbx, 184(%rdi)\n"
    "  movq %rbp, 192(%rdi)\n"
    "  movq %r12, 200(%rdi)\n"
    "  movq %r13, 208(%rdi)\n"
    "  movq %r14, 216(%rdi)\n"
    "  movq %r15, 224(%rdi)\n"
    "  movq 112(%rdi), %rax\n"
    "  cmpq $3, %rax\n"
    "  je 7f\n"
    "  cmpq $2, %rax\n"
    "  je 6f\n"
    "  cmpq $1, %rax\n"
    "  je 5f\n"
    "  jmp 8f\n"
    "5:\n" X16(VEC_STORE_XMM) "  jmp 8f\n"
    "6:\n" X16(VEC_STORE_YMM) "  vzeroupper\n  jmp 8f\n"
    "7:\n" X32(VEC_STORE_ZMM) X8(K_STORE) "  vzeroupper\n"
    "8:\n"
    "  popq %rdi\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbp\n"
    "  popq %rbx\n"
    "  ret\n"
    ".size checked_syscall, .-checked_syscall\n");

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_corrupted{false};
std::atomic<uint32_t> g_futex_word{0};
std::atomic<uint64_t> g_signals{0};
int g_vec_mode = 0;

void Corrupted(const char* what, const std::string& detail) {
  if (g_corrupted.exchange(true)) return;
  fprintf(stdout, "CORRUPTED: %s %s\n", what, detail.c_str());
  fflush(stdout);
  _exit(1);
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int VectorMode() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 1;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (uint64_t{hi} << 32) | lo;
  if ((xcr0 & 0xe6) == 0xe6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F)) return 3;
  if ((xcr0 & 0x6) == 0x6 && (c & bit_AVX)) return 2;
  return 1;
}

// Arithmetic flags and DF; the rest are the kernel's or must stay clear.
constexpr uint64_t kFlagMask = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x400 | 0x800;

void Fill(CheckedCall* c, uint64_t seed) {
  for (int i = 0; i < 6; ++i) c->keep[i] = Mix(seed * 64 + i);
  c->flags_in = 0x2 | (Mix(seed) & kFlagMask) | 0x400;  // DF always set
  c->vec_mode = static_cast<uint64_t>(g_vec_mode);
  for (int r = 0; r < 32; ++r) {
    for (int q = 0; q < 8; ++q) {
      uint64_t v = Mix(seed * 4096 + r * 8 + q);
      memcpy(&c->vec_in[r][q * 8], &v, 8);
    }
  }
  for (int k = 0; k < 8; ++k) c->k_in[k] = Mix(seed * 16 + 1000 + k);
}

void Verify(const CheckedCall& c, const char* where) {
  static const char* kArgNames[6] = {"rdi", "rsi", "rdx", "r10", "r8", "r9"};
  static const char* kKeepNames[6] = {"rbx", "rbp", "r12", "r13", "r14", "r15"};
  char detail[256];
  for (int i = 0; i < 6; ++i) {
    if (c.args_out[i] != c.args[i]) {
      snprintf(detail, sizeof(detail), "%s=%#lx want %#lx", kArgNames[i], c.args_out[i], c.args[i]);
      Corrupted(where, detail);
    }
    if (c.keep_out[i] != c.keep[i]) {
      snprintf(detail, sizeof(detail), "%s=%#lx want %#lx", kKeepNames[i], c.keep_out[i], c.keep[i]);
      Corrupted(where, detail);
    }
  }
  if ((c.flags_out & kFlagMask) != (c.flags_in & kFlagMask)) {
    snprintf(detail, sizeof(detail), "rflags=%#lx want %#lx", c.flags_out & kFlagMask,
             c.flags_in & kFlagMask);
    Corrupted(where, detail);
  }
  const int regs = g_vec_mode == 3 ? 32 : g_vec_mode >= 1 ? 16 : 0;
  const int bytes = g_vec_mode == 3 ? 64 : g_vec_mode == 2 ? 32 : 16;
  for (int r = 0; r < regs; ++r) {
    if (memcmp(c.vec_in[r], c.vec_out[r], bytes) != 0) {
      snprintf(detail, sizeof(detail), "vector register %d (%d bytes) changed", r, bytes);
      Corrupted(where, detail);
    }
  }
  if (g_vec_mode == 3) {
    for (int k = 0; k < 8; ++k) {
      if (c.k_out[k] != c.k_in[k]) {
        snprintf(detail, sizeof(detail), "k%d=%#lx want %#lx", k, c.k_out[k], c.k_in[k]);
        Corrupted(where, detail);
      }
    }
  }
}

// --- helper threads -----------------------------------------------------

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
uint64_t g_pingpong = 0;
uint64_t g_turns[2] = {0, 0};

void* PingPong(void* arg) {
  const uint64_t parity = reinterpret_cast<uintptr_t>(arg);
  pthread_mutex_lock(&g_mutex);
  while (!g_stop.load()) {
    if (g_pingpong % 2 == parity) {
      ++g_pingpong;
      ++g_turns[parity];
      pthread_cond_broadcast(&g_cond);
    } else {
      struct timespec deadline;
      clock_gettime(CLOCK_REALTIME, &deadline);
      deadline.tv_nsec += 50 * 1000 * 1000;
      if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&g_cond, &g_mutex, &deadline);
    }
  }
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  return nullptr;
}

std::atomic<uint64_t> g_busy_calls{0};

void* Busy(void*) {
  CheckedCall* c = static_cast<CheckedCall*>(aligned_alloc(64, sizeof(CheckedCall)));
  for (uint64_t i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    memset(c, 0, sizeof(*c));
    Fill(c, 0x100000000ull + i);
    c->nr = SYS_getpid;
    for (int a = 0; a < 6; ++a) c->args[a] = Mix(i * 8 + a + 77);
    checked_syscall(c);
    if (static_cast<int64_t>(c->rax_out) != getpid()) Corrupted("busy getpid", "bad return");
    Verify(*c, "busy thread");
    g_busy_calls.fetch_add(1, std::memory_order_relaxed);
  }
  free(c);
  return nullptr;
}

std::atomic<uint64_t> g_malloc_rounds{0};

void* MallocChurn(void*) {
  void* blocks[64] = {};
  size_t sizes[64] = {};
  for (uint64_t i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    const int slot = static_cast<int>(Mix(i) % 64);
    if (blocks[slot] != nullptr) {
      const unsigned char expect = static_cast<unsigned char>(slot * 7 + sizes[slot]);
      const unsigned char* p = static_cast<unsigned char*>(blocks[slot]);
      for (size_t b = 0; b < sizes[slot]; b += 97) {
        if (p[b] != expect) Corrupted("malloc churn", "block contents changed");
      }
      free(blocks[slot]);
    }
    sizes[slot] = 1 + Mix(i + 1) % 200000;
    blocks[slot] = malloc(sizes[slot]);
    memset(blocks[slot], static_cast<unsigned char>(slot * 7 + sizes[slot]), sizes[slot]);
    if (i % 64 == 0) {
      g_malloc_rounds.fetch_add(1, std::memory_order_relaxed);
      usleep(1000);
    }
  }
  for (void* b : blocks) free(b);
  return nullptr;
}

void* Waker(void*) {
  while (!g_stop.load()) {
    usleep(5000);
    g_futex_word.fetch_add(1);
    syscall(SYS_futex, &g_futex_word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  g_futex_word.fetch_add(1);
  syscall(SYS_futex, &g_futex_word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  return nullptr;
}

void OnAlarm(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "nanosleep";
  std::string stop_file;
  std::string ready_file;
  bool helpers = true;
  bool signals = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (arg == "--stop-file" && i + 1 < argc) stop_file = argv[++i];
    else if (arg == "--ready-file" && i + 1 < argc) ready_file = argv[++i];
    else if (arg == "--no-helpers") helpers = false;
    else if (arg == "--signals") signals = true;
    else {
      fprintf(stderr, "usage: injection_target --stop-file PATH [--ready-file PATH] [--mode "
                      "nanosleep|futex|futex_timeout|select|busy] [--no-helpers] [--signals]\n");
      return 2;
    }
  }
  if (stop_file.empty()) {
    fprintf(stderr, "injection_target: --stop-file is required\n");
    return 2;
  }
  g_vec_mode = VectorMode();
  const bool futex_mode = mode == "futex" || mode == "futex_timeout";
  pthread_t threads[6];
  int thread_count = 0;
  if (helpers) {
    pthread_create(&threads[thread_count++], nullptr, PingPong, reinterpret_cast<void*>(0));
    pthread_create(&threads[thread_count++], nullptr, PingPong, reinterpret_cast<void*>(1));
    pthread_create(&threads[thread_count++], nullptr, Busy, nullptr);
    pthread_create(&threads[thread_count++], nullptr, MallocChurn, nullptr);
  }
  if (futex_mode) pthread_create(&threads[thread_count++], nullptr, Waker, nullptr);
  if (signals) {
    struct sigaction sa = {};
    sa.sa_handler = OnAlarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, nullptr);
    struct itimerval timer = {{0, 2000}, {0, 2000}};
    setitimer(ITIMER_REAL, &timer, nullptr);
  }
  printf("ready pid=%d vec_mode=%d\n", getpid(), g_vec_mode);
  fflush(stdout);
  if (!ready_file.empty()) {
    const std::string temp = ready_file + ".tmp";
    if (FILE* f = fopen(temp.c_str(), "w")) {
      fprintf(f, "%d\n", getpid());
      fclose(f);
      rename(temp.c_str(), ready_file.c_str());
    }
  }

  CheckedCall* c = static_cast<CheckedCall*>(aligned_alloc(64, sizeof(CheckedCall)));
  uint64_t iterations = 0, interrupted = 0;
  struct timespec ts;
  struct timeval tv;
  for (uint64_t i = 0;; ++i) {
    if (access(stop_file.c_str(), F_OK) == 0) break;
    if (mode == "busy") {
      volatile uint64_t sink = 0;
      for (int spin = 0; spin < 1000000; ++spin) sink = sink + Mix(spin);
      ++iterations;
      continue;
    }
    memset(c, 0, sizeof(*c));
    Fill(c, i);
    for (int a = 0; a < 6; ++a) c->args[a] = Mix(i * 8 + a);
    if (mode == "nanosleep") {
      ts = {0, 20 * 1000 * 1000};
      c->nr = SYS_nanosleep;
      c->args[0] = reinterpret_cast<uintptr_t>(&ts);
      c->args[1] = 0;
    } else if (futex_mode) {
      ts = {0, 20 * 1000 * 1000};
      c->nr = SYS_futex;
      c->args[0] = reinterpret_cast<uintptr_t>(&g_futex_word);
      c->args[1] = FUTEX_WAIT_PRIVATE;
      c->args[2] = g_futex_word.load();
      c->args[3] = mode == "futex" ? 0 : reinterpret_cast<uintptr_t>(&ts);
    } else if (mode == "select") {
      tv = {0, 20 * 1000};
      c->nr = SYS_select;
      c->args[0] = 0;
      c->args[1] = c->args[2] = c->args[3] = 0;
      c->args[4] = reinterpret_cast<uintptr_t>(&tv);
    } else {
      fprintf(stderr, "injection_target: unknown mode %s\n", mode.c_str());
      return 2;
    }
    checked_syscall(c);
    const int64_t ret = static_cast<int64_t>(c->rax_out);
    bool ok = ret == 0;
    if (futex_mode) ok = ok || ret == -EAGAIN || ret == -ETIMEDOUT;
    if (signals && ret == -EINTR) {
      ok = true;
      ++interrupted;
    }
    if (!ok) {
      char detail[64];
      snprintf(detail, sizeof(detail), "returned %ld", static_cast<long>(ret));
      Corrupted(mode.c_str(), detail);
    }
    Verify(*c, "main thread");
    ++iterations;
  }
  g_stop.store(true);
  if (signals) {
    struct itimerval off = {};
    setitimer(ITIMER_REAL, &off, nullptr);
  }
  for (int t = 0; t < thread_count; ++t) pthread_join(threads[t], nullptr);
  free(c);
  if (helpers && g_pingpong != g_turns[0] + g_turns[1]) {
    Corrupted("pingpong", "turn count mismatch");
  }
  printf("ok iterations=%lu interrupted=%lu pingpong=%lu busy=%lu malloc=%lu signals=%lu\n",
         static_cast<unsigned long>(iterations), static_cast<unsigned long>(interrupted),
         static_cast<unsigned long>(g_pingpong), static_cast<unsigned long>(g_busy_calls.load()),
         static_cast<unsigned long>(g_malloc_rounds.load()),
         static_cast<unsigned long>(g_signals.load()));
  return 0;
}
