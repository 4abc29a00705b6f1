// A program with exactly known NVTX activity, for the shim's tests: on the
// main thread, --steps times: push "step", push "forward" (sleep
// --sleep-us), pop, pop; a start/end range "async" started on the main thread
// and ended on a second thread; a mark from the second thread; a push/pop
// range "dom-range" in the domain "gpuos-test"; a range "same-name" pushed
// in a second handle of "gpuos-test" (a domain created twice, as two
// libraries do) and popped in the first; at exit, after the main thread's
// thread-locals are destroyed, a mark "at-exit" and a push/pop (what a
// library's static destructor may do).  Prints the main thread's
// and the helper thread's tids so the test can check attribution.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

long Tid() { return syscall(SYS_gettid); }

// exit() destroys the main thread's thread-locals, then runs this.
struct MarksAtExit {
  ~MarksAtExit() {
    nvtxMarkA("at-exit");
    nvtxRangePushA("exit-range");
    nvtxRangePop();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int steps = 5;
  int sleep_us = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--steps") == 0) steps = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--sleep-us") == 0) sleep_us = atoi(argv[i + 1]);
  }
  printf("main_tid=%ld\n", Tid());
  for (int i = 0; i < steps; ++i) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    usleep(static_cast<useconds_t>(sleep_us));
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxRangeId_t id = nvtxRangeStartA("async");
  long helper_tid = 0;
  std::thread helper([&] {
    helper_tid = Tid();
    usleep(static_cast<useconds_t>(sleep_us));
    nvtxRangeEnd(id);
    nvtxMarkA("mark-from-helper");
  });
  helper.join();
  printf("helper_tid=%ld\n", helper_tid);
  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuos-test");
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = "dom-range";
  attr.colorType = NVTX_COLOR_ARGB;
  attr.color = 0xFF00FF00;
  nvtxDomainRangePushEx(domain, &attr);
  usleep(static_cast<useconds_t>(sleep_us));
  nvtxDomainRangePop(domain);
  nvtxDomainHandle_t same_name = nvtxDomainCreateA("gpuos-test");
  attr.message.ascii = "same-name";
  nvtxDomainRangePushEx(same_name, &attr);
  nvtxDomainRangePop(domain);
  static MarksAtExit at_exit;
  fflush(stdout);
  return 0;
}
