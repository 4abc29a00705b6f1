// Where the injector's stub thread is (cupti_shim/stub_page.h): the rule on
// the kernel's /proc/<pid>/task/<tid>/syscall text, and the same rule on
// real threads of this process, one of them blocked inside a page of
// machine code as the stub would be.
#include "stub_page.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

constexpr uintptr_t kPage = 0x7f0000400000;
constexpr size_t kSize = 0x1000;

TEST(ShimStubPageTest, InASystemCallOutsideThePageMayUnmap) {
  EXPECT_EQ(ClassifyStubThread("202 0x55d0 0x80 0x0 0x0 0x0 0x0 0x7ffd1000 0x7f1234567890\n",
                               kPage, kSize),
            StubThreadPlace::kOutside);
  // The first byte after the page is outside it.
  EXPECT_EQ(ClassifyStubThread("0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd1000 0x7f0000401000", kPage,
                               kSize),
            StubThreadPlace::kOutside);
}

TEST(ShimStubPageTest, AnywhereInsideThePageKeepsIt) {
  EXPECT_EQ(ClassifyStubThread("0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd1000 0x7f0000400000", kPage,
                               kSize),
            StubThreadPlace::kInside);
  EXPECT_EQ(ClassifyStubThread("0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd1000 0x7f0000400fff", kPage,
                               kSize),
            StubThreadPlace::kInside);
  // Stopped (not in a system call) inside it: kept too.
  EXPECT_EQ(ClassifyStubThread("-1 0x7ffd1000 0x7f0000400010", kPage, kSize),
            StubThreadPlace::kInside);
}

TEST(ShimStubPageTest, RunningOrStoppedElsewhereMeansAskAgain) {
  EXPECT_EQ(ClassifyStubThread("running\n", kPage, kSize), StubThreadPlace::kUnknown);
  EXPECT_EQ(ClassifyStubThread("-1 0x7ffd1000 0x55d000001234\n", kPage, kSize),
            StubThreadPlace::kUnknown);
  EXPECT_EQ(ClassifyStubThread("", kPage, kSize), StubThreadPlace::kUnknown);
  EXPECT_EQ(ClassifyStubThread("garbage here", kPage, kSize), StubThreadPlace::kUnknown);
  // Truncated: no pc to trust.
  EXPECT_EQ(ClassifyStubThread("0 0x3 0x7ffd", kPage, kSize), StubThreadPlace::kUnknown);
}

TEST(ShimStubPageTest, AThreadThatIsGoneMayUnmap) {
  std::atomic<int> tid{0};
  std::thread([&] { tid = static_cast<int>(syscall(SYS_gettid)); }).join();
  // Thread ids are not reused this fast.
  EXPECT_EQ(LocateStubThread(tid, kPage, kSize), StubThreadPlace::kGone);
}

TEST(ShimStubPageTest, AThreadRunningInUserSpaceCannotBeLocated) {
  std::atomic<int> tid{0};
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    tid = static_cast<int>(syscall(SYS_gettid));
    while (!stop.load()) {
    }
  });
  while (tid.load() == 0) std::this_thread::yield();
  // Its pc is somewhere in user space; the kernel says only "running".
  // (On a loaded machine it may be preempted: then it is not running, yet
  // not in a system call, which is just as unknown.)
  EXPECT_EQ(LocateStubThread(tid, kPage, kSize), StubThreadPlace::kUnknown);
  stop = true;
  spinner.join();
}

TEST(ShimStubPageTest, TheCallingThreadIsInsideItsOwnReadOfTheFile) {
  EXPECT_EQ(LocateStubThread(static_cast<int>(syscall(SYS_gettid)), kPage, kSize),
            StubThreadPlace::kOutside);
}

// Polls until `want` (a thread needs a moment to reach its system call).
bool Becomes(int tid, uintptr_t page, size_t size, StubThreadPlace want) {
  for (int i = 0; i < 2000; ++i) {
    if (LocateStubThread(tid, page, size) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

#if defined(__x86_64__)
TEST(ShimStubPageTest, RealThreadBlockedInsideAPageThenOutsideIt) {
  int gate[2], second[2];
  ASSERT_EQ(pipe(gate), 0);
  ASSERT_EQ(pipe(second), 0);
  const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* page = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  // read(gate[0], rsp-16, 1); ret -- a leaf function, as the stub is code
  // of its own that blocks in a system call.
  unsigned char code[] = {0xBF, 0, 0, 0, 0,                    // mov edi, fd
                          0x31, 0xC0,                          // xor eax, eax (read)
                          0x48, 0x8D, 0x74, 0x24, 0xF0,        // lea rsi, [rsp-16]
                          0xBA, 0x01, 0x00, 0x00, 0x00,        // mov edx, 1
                          0x0F, 0x05,                          // syscall
                          0xC3};                               // ret
  const int32_t fd = gate[0];
  memcpy(code + 1, &fd, sizeof(fd));
  memcpy(page, code, sizeof(code));
  ASSERT_EQ(mprotect(page, size, PROT_READ | PROT_EXEC), 0);
  const uintptr_t start = reinterpret_cast<uintptr_t>(page);

  std::atomic<int> tid{0};
  std::thread stub([&] {
    tid = static_cast<int>(syscall(SYS_gettid));
    reinterpret_cast<void (*)()>(page)();  // blocks in the page
    char c;
    if (read(second[0], &c, 1) < 0) return;  // blocks outside it
  });
  while (tid.load() == 0) std::this_thread::yield();
  EXPECT_TRUE(Becomes(tid, start, size, StubThreadPlace::kInside));
  // An unrelated page: the same thread is outside that one.
  EXPECT_EQ(LocateStubThread(tid, start + size, size), StubThreadPlace::kOutside);

  ASSERT_EQ(write(gate[1], "x", 1), 1);
  EXPECT_TRUE(Becomes(tid, start, size, StubThreadPlace::kOutside));
  ASSERT_EQ(write(second[1], "x", 1), 1);
  stub.join();
  // join returns when the kernel clears the thread's tid, a moment before
  // the task leaves /proc (meanwhile it reads as kUnknown: ask again).
  EXPECT_TRUE(Becomes(tid, start, size, StubThreadPlace::kGone));
  munmap(page, size);
  for (int f : {gate[0], gate[1], second[0], second[1]}) close(f);
}
#endif

}  // namespace
}  // namespace gpuos_shim
