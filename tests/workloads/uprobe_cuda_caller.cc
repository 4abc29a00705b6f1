// Calls the CUDA driver functions of a libcuda.so.1 (the build tree's
// fake_libcuda.c in tests) a known number of times with known arguments,
// on two threads, and prints what it did, for cuda_uprobes_test to compare
// with what the uprobes recorded.  dlopen()s the library by path, as a
// CUDA program's runtime does, so that the library is mapped before the
// test attaches.
//
//   uprobe_cuda_caller LIB calls ROUNDS   each round: wait for SIGUSR1, run
//                                         the plan on two threads, print it
//   uprobe_cuda_caller LIB bench ITERS    three rounds: wait for SIGUSR1,
//                                         time ITERS cuEventQuery calls
//
// Output (stdout, line-buffered):
//   sym NAME ADDR VADDR     each function found (ADDR in memory, VADDR in
//                           the file's address space), then "ready PID"
//   call tid=T name=N bytes=B grid=X,Y,Z block=X,Y,Z ret=R start=NS end=NS
//                           one per call, NS from CLOCK_MONOTONIC (the
//                           clock of bpf_ktime_get_ns)
//   done ROUND              after each round's calls
//   bench ROUND ns_per_call=F
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using u32 = unsigned int;
using u64 = unsigned long long;

// Every handle type of the driver API is a pointer or a 64-bit integer.
typedef int (*Launch11)(void*, u32, u32, u32, u32, u32, u32, u32, void*, void**, void**);
typedef int (*Launch10)(void*, u32, u32, u32, u32, u32, u32, u32, void*, void**);
typedef int (*LaunchEx)(const void*, void*, void**, void**);
typedef int (*Ptr2)(void*, void*);
typedef int (*Copy3)(u64, u64, size_t);
typedef int (*Copy4)(u64, u64, size_t, void*);
typedef int (*Struct1)(const void*);
typedef int (*Struct2)(const void*, void*);
typedef int (*Memset8)(u64, unsigned char, size_t);
typedef int (*Memset16)(u64, unsigned short, size_t);
typedef int (*Memset32)(u64, unsigned int, size_t);
typedef int (*Memset8Async)(u64, unsigned char, size_t, void*);
typedef int (*Memset16Async)(u64, unsigned short, size_t, void*);
typedef int (*Memset32Async)(u64, unsigned int, size_t, void*);
typedef int (*Ptr1)(void*);
typedef int (*Void0)();
typedef int (*WaitEvent)(void*, void*, u32);

enum Kind {
  kLaunch11, kLaunch10, kLaunchEx, kGraph, kCopy3, kCopy4, kCopy2D, kCopy2DAsync, kCopy3D,
  kCopy3DAsync, kMemset8, kMemset16, kMemset32, kMemset8Async, kMemset16Async, kMemset32Async,
  kPtr1, kVoid0, kWaitEvent,
};

struct Function {
  const char* name;
  Kind kind;
  void* address = nullptr;
};

// Every name of bpf/cuda_uprobes.h's list, with its signature.
std::vector<Function> g_functions = {
    {"cuLaunchKernel", kLaunch11},          {"cuLaunchKernel_ptsz", kLaunch11},
    {"cuLaunchKernelEx", kLaunchEx},        {"cuLaunchKernelEx_ptsz", kLaunchEx},
    {"cuLaunchCooperativeKernel", kLaunch10}, {"cuLaunchCooperativeKernel_ptsz", kLaunch10},
    {"cuGraphLaunch", kGraph},              {"cuGraphLaunch_ptsz", kGraph},
    {"cuMemcpy", kCopy3},                   {"cuMemcpy_ptds", kCopy3},
    {"cuMemcpyAsync", kCopy4},              {"cuMemcpyAsync_ptsz", kCopy4},
    {"cuMemcpyHtoD_v2", kCopy3},            {"cuMemcpyHtoD_v2_ptds", kCopy3},
    {"cuMemcpyDtoH_v2", kCopy3},            {"cuMemcpyDtoH_v2_ptds", kCopy3},
    {"cuMemcpyDtoD_v2", kCopy3},            {"cuMemcpyDtoD_v2_ptds", kCopy3},
    {"cuMemcpyHtoDAsync_v2", kCopy4},       {"cuMemcpyHtoDAsync_v2_ptsz", kCopy4},
    {"cuMemcpyDtoHAsync_v2", kCopy4},       {"cuMemcpyDtoHAsync_v2_ptsz", kCopy4},
    {"cuMemcpyDtoDAsync_v2", kCopy4},       {"cuMemcpyDtoDAsync_v2_ptsz", kCopy4},
    {"cuMemcpy2D_v2", kCopy2D},             {"cuMemcpy2D_v2_ptds", kCopy2D},
    {"cuMemcpy2DUnaligned_v2", kCopy2D},    {"cuMemcpy2DUnaligned_v2_ptds", kCopy2D},
    {"cuMemcpy2DAsync_v2", kCopy2DAsync},   {"cuMemcpy2DAsync_v2_ptsz", kCopy2DAsync},
    {"cuMemcpy3D_v2", kCopy3D},             {"cuMemcpy3D_v2_ptds", kCopy3D},
    {"cuMemcpy3DAsync_v2", kCopy3DAsync},   {"cuMemcpy3DAsync_v2_ptsz", kCopy3DAsync},
    {"cuMemsetD8_v2", kMemset8},            {"cuMemsetD8_v2_ptds", kMemset8},
    {"cuMemsetD16_v2", kMemset16},          {"cuMemsetD16_v2_ptds", kMemset16},
    {"cuMemsetD32_v2", kMemset32},          {"cuMemsetD32_v2_ptds", kMemset32},
    {"cuMemsetD8Async", kMemset8Async},     {"cuMemsetD8Async_ptsz", kMemset8Async},
    {"cuMemsetD16Async", kMemset16Async},   {"cuMemsetD16Async_ptsz", kMemset16Async},
    {"cuMemsetD32Async", kMemset32Async},   {"cuMemsetD32Async_ptsz", kMemset32Async},
    {"cuStreamSynchronize", kPtr1},         {"cuStreamSynchronize_ptsz", kPtr1},
    {"cuCtxSynchronize", kVoid0},           {"cuCtxSynchronize_v2", kPtr1},
    {"cuEventSynchronize", kPtr1},          {"cuStreamWaitEvent", kWaitEvent},
    {"cuStreamWaitEvent_ptsz", kWaitEvent}, {"cuStreamQuery", kPtr1},
    {"cuStreamQuery_ptsz", kPtr1},          {"cuEventQuery", kPtr1},
};

u64 NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<u64>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

void Put64(unsigned char* base, size_t offset, u64 value) { memcpy(base + offset, &value, 8); }

struct Call {
  std::string name;
  u64 bytes = 0;
  u32 grid[3] = {0, 0, 0};
  u32 block[3] = {0, 0, 0};
};

// One call of fn, the rep-th on thread t; returns what an exact recording
// of it holds.
Call CallOnce(const Function& fn, size_t index, int t, int rep, int* ret) {
  Call c;
  c.name = fn.name;
  void* stream = reinterpret_cast<void*>(0x5000 + t);
  void* handle = reinterpret_cast<void*>(0x7000 + index);
  u64 n = 4096ull * (t + 1) + index * 8 + rep;
  void* a = fn.address;
  switch (fn.kind) {
    case kLaunch11:
    case kLaunch10: {
      u32 g[3] = {static_cast<u32>(index + 1), 2, static_cast<u32>(3 + t)};
      u32 b[3] = {32, static_cast<u32>(4 + t), static_cast<u32>(1 + rep)};
      // Thread 1's first launch has no function: CUDA_ERROR_INVALID_HANDLE.
      void* f = (t == 1 && rep == 0) ? nullptr : handle;
      *ret = fn.kind == kLaunch11
                 ? reinterpret_cast<Launch11>(a)(f, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream,
                                                 nullptr, nullptr)
                 : reinterpret_cast<Launch10>(a)(f, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream,
                                                 nullptr);
      memcpy(c.grid, g, sizeof(g));
      memcpy(c.block, b, sizeof(b));
      break;
    }
    case kLaunchEx: {
      // CUlaunchConfig (cuda.h): gridDim X,Y,Z, blockDim X,Y,Z, sharedMemBytes,
      // hStream at 32, attrs at 40, numAttrs at 48; 56 bytes.
      alignas(8) unsigned char config[56] = {};
      u32 dims[6] = {static_cast<u32>(100 + index), static_cast<u32>(5 + t), 7,
                     static_cast<u32>(64 + rep), 2, 1};
      memcpy(config, dims, sizeof(dims));
      memcpy(config + 32, &stream, sizeof(stream));
      *ret = reinterpret_cast<LaunchEx>(a)(config, handle, nullptr, nullptr);
      memcpy(c.grid, dims, 12);
      memcpy(c.block, dims + 3, 12);
      break;
    }
    case kGraph:
      *ret = reinterpret_cast<Ptr2>(a)(handle, stream);
      break;
    case kCopy3:
      // cuMemcpyDtoH_v2's second call copies 0 bytes: CUDA_ERROR_INVALID_VALUE.
      if (strcmp(fn.name, "cuMemcpyDtoH_v2") == 0 && rep == 1) n = 0;
      *ret = reinterpret_cast<Copy3>(a)(0x10000, 0x20000, n);
      c.bytes = n;
      break;
    case kCopy4:
      *ret = reinterpret_cast<Copy4>(a)(0x10000, 0x20000, n, stream);
      c.bytes = n;
      break;
    case kCopy2D:
    case kCopy2DAsync: {
      // CUDA_MEMCPY2D: WidthInBytes at 112, Height at 120; 128 bytes.
      alignas(8) unsigned char copy[128] = {};
      u64 width = 64 + index, height = 3 + t + rep;
      Put64(copy, 112, width);
      Put64(copy, 120, height);
      *ret = fn.kind == kCopy2D ? reinterpret_cast<Struct1>(a)(copy)
                                : reinterpret_cast<Struct2>(a)(copy, stream);
      c.bytes = width * height;
      break;
    }
    case kCopy3D:
    case kCopy3DAsync: {
      // CUDA_MEMCPY3D: WidthInBytes, Height, Depth at 176, 184, 192; 200 bytes.
      alignas(8) unsigned char copy[200] = {};
      u64 width = 16 + index, height = 2 + t, depth = 5 + rep;
      Put64(copy, 176, width);
      Put64(copy, 184, height);
      Put64(copy, 192, depth);
      *ret = fn.kind == kCopy3D ? reinterpret_cast<Struct1>(a)(copy)
                                : reinterpret_cast<Struct2>(a)(copy, stream);
      c.bytes = width * height * depth;
      break;
    }
    case kMemset8:
      *ret = reinterpret_cast<Memset8>(a)(0x10000, 0xab, n);
      c.bytes = n;
      break;
    case kMemset16:
      *ret = reinterpret_cast<Memset16>(a)(0x10000, 0xabcd, n);
      c.bytes = 2 * n;
      break;
    case kMemset32:
      *ret = reinterpret_cast<Memset32>(a)(0x10000, 0xabcdef, n);
      c.bytes = 4 * n;
      break;
    case kMemset8Async:
      *ret = reinterpret_cast<Memset8Async>(a)(0x10000, 0xab, n, stream);
      c.bytes = n;
      break;
    case kMemset16Async:
      *ret = reinterpret_cast<Memset16Async>(a)(0x10000, 0xabcd, n, stream);
      c.bytes = 2 * n;
      break;
    case kMemset32Async:
      *ret = reinterpret_cast<Memset32Async>(a)(0x10000, 0xabcdef, n, stream);
      c.bytes = 4 * n;
      break;
    case kPtr1:
      *ret = reinterpret_cast<Ptr1>(a)(handle);
      break;
    case kVoid0:
      *ret = reinterpret_cast<Void0>(a)();
      break;
    case kWaitEvent:
      *ret = reinterpret_cast<WaitEvent>(a)(stream, handle, 0);
      break;
  }
  return c;
}

std::mutex g_print_mu;

void RunPlan(int t) {
  int tid = static_cast<int>(syscall(SYS_gettid));
  std::string out;
  char line[512];
  for (size_t i = 0; i < g_functions.size(); ++i) {
    const Function& fn = g_functions[i];
    if (!fn.address) continue;
    int reps = 1 + static_cast<int>((i + t) % 3);
    for (int rep = 0; rep < reps; ++rep) {
      int ret = -1;
      u64 start = NowNs();
      Call c = CallOnce(fn, i, t, rep, &ret);
      u64 end = NowNs();
      auto put = [&](const Call& call, int result) {
        snprintf(line, sizeof(line),
                 "call tid=%d name=%s bytes=%llu grid=%u,%u,%u block=%u,%u,%u ret=%d start=%llu "
                 "end=%llu\n",
                 tid, call.name.c_str(), call.bytes, call.grid[0], call.grid[1], call.grid[2],
                 call.block[0], call.block[1], call.block[2], result, start, end);
        out += line;
      };
      put(c, ret);
      // fake_libcuda's cuCtxSynchronize_v2 calls cuCtxSynchronize inside.
      if (c.name == "cuCtxSynchronize_v2") {
        Call inner;
        inner.name = "cuCtxSynchronize";
        put(inner, 0);
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_print_mu);
  fputs(out.c_str(), stdout);
}

void WaitForGo(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBCUDA calls ROUNDS | bench ITERS\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // Blocked before any thread starts, so that only sigwait() takes it.
  sigset_t go;
  sigemptyset(&go);
  sigaddset(&go, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &go, nullptr);

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  for (Function& fn : g_functions) {
    fn.address = dlsym(lib, fn.name);
    if (!fn.address) continue;
    Dl_info info;
    uintptr_t vaddr = 0;
    if (dladdr(fn.address, &info) && info.dli_fbase) {
      vaddr = reinterpret_cast<uintptr_t>(fn.address) - reinterpret_cast<uintptr_t>(info.dli_fbase);
    }
    printf("sym %s %p %#lx\n", fn.name, fn.address, static_cast<unsigned long>(vaddr));
  }
  printf("ready %d\n", getpid());

  const std::string mode = argv[2];
  const long count = atol(argv[3]);
  if (mode == "calls") {
    for (long round = 0; round < count; ++round) {
      WaitForGo(go);
      std::thread a(RunPlan, 0), b(RunPlan, 1);
      a.join();
      b.join();
      printf("done %ld\n", round);
    }
  } else if (mode == "bench") {
    auto query = reinterpret_cast<Ptr1>(dlsym(lib, "cuEventQuery"));
    if (!query) return 1;
    for (int round = 0; round < 3; ++round) {
      WaitForGo(go);
      double best = 1e30;
      for (int run = 0; run < 3; ++run) {
        u64 start = NowNs();
        for (long i = 0; i < count; ++i) query(nullptr);
        double per_call = static_cast<double>(NowNs() - start) / count;
        if (per_call < best) best = per_call;
      }
      printf("bench %d ns_per_call=%.1f\n", round, best);
    }
  } else {
    fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
  }
  return 0;
}
