// The shim's CUPTI collection lifecycle (cupti_lifecycle.cc), run for real:
// launch-mode start at InitializeInjection, device kinds and API timing
// callbacks switched at capture window edges, stepping aside for another
// CUPTI client, and CUPTI taken out of the process between far windows and
// subscribed again at the next one
// (GPUOS_CAPTURE_FINALIZE_GAP: the cuptiFinalize handshake in an API exit
// callback, a new subscription per window, the refusal while a stream is
// being captured into a CUDA graph).  There is no GPU or driver on the
// build host, so CUPTI and the driver call are played by
// tests/workloads/fake_cupti (one subscriber at a time, callbacks only where
// enabled, cuptiFinalize forgets everything); tests/gpu/capture_check.py
// holds the same behaviour to the real CUPTI on a GPU.
//
// Each case runs in a process of its own (this binary again, with
// GPUOS_FAKE_CUPTI_CHILD set): the shim reads its environment when it
// loads.
#include <dlfcn.h>
#include <unistd.h>

#include <time.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include <cupti.h>

#include "capture_control.h"
#include "cupti_injection.h"
#include "event_channel.h"
#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

constexpr int kSteps = 50;

std::string SelfDir() {
  char path[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  std::string self(path, n > 0 ? static_cast<size_t>(n) : 0);
  return self.substr(0, self.rfind('/'));
}

std::string FakeLibrary() { return SelfDir() + "/workloads/fake_cupti/libcuda.so.1"; }

struct Outcome {
  std::map<int, std::string> steps;  // step -> "kernels=K subscribed=S"
  std::map<int, std::string> api;    // step -> "launch=R,D keep=C,X,G" (callbacks on)
  int subscribes = -1, finalizes = -1;
  std::string output;
};

// Runs the child case with `env` ("A=1 B=2") and reads what it printed.
Outcome RunChild(const std::string& env) {
  Outcome outcome;
  char self[PATH_MAX] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return outcome;
  const std::string command = "env GPUOS_FAKE_CUPTI_CHILD=1 GPUOS_SHIM_SOCKET=/nonexistent/agent.sock "
                              "GPUOS_CUPTI_LIBRARY=" + FakeLibrary() + " " + env + " " + self +
                              " --gtest_filter=CuptiLifecycleChild.* 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char line[512];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    outcome.output += line;
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "step") {
      int step = -1;
      std::string rest;
      in >> step;
      std::getline(in, rest);
      outcome.steps[step] = rest.substr(rest.find_first_not_of(' '));
    } else if (word == "api") {
      int step = -1;
      std::string rest;
      in >> step;
      std::getline(in, rest);
      outcome.api[step] = rest.substr(rest.find_first_not_of(' '));
    } else if (word == "counts") {
      in >> outcome.subscribes >> outcome.finalizes;
    }
  }
  pclose(pipe);
  return outcome;
}

bool InWindow(int step) { return step % 10 < 2; }  // every=10,steps=2

TEST(CuptiLifecycle, TheFakeCuptiIsBuilt) {
  ASSERT_EQ(access(FakeLibrary().c_str(), R_OK), 0) << FakeLibrary();
}

TEST(CuptiLifecycle, CuptiLeavesAtEveryFarGapAndComesBackForEachWindow) {
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=1");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=0")
        << "step " << step << "\n" << got.output;
  }
  // Windows 0-1, 10-11, 20-21, 30-31, 40-41: one subscription each, and a
  // finalize after each.
  EXPECT_EQ(got.subscribes, 5) << got.output;
  EXPECT_EQ(got.finalizes, 5) << got.output;
}

TEST(CuptiLifecycle, OffKeepsCuptiSubscribedAndSwitchesTheKindsOnly) {
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=off");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.subscribes, 1) << got.output;
  EXPECT_EQ(got.finalizes, 0) << got.output;
}

TEST(CuptiLifecycle, TheDefaultKeepsShortGapsSubscribed) {
  // 8 steps between windows, far below the default's 500 steps or 10 s.
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  EXPECT_EQ(got.steps.at(5), "kernels=0 subscribed=1") << got.output;
  EXPECT_EQ(got.finalizes, 0) << got.output;
  // After the last window of steps=A..B none comes: CUPTI leaves for good.
  const Outcome range = RunChild("GPUOS_CAPTURE=steps=10..11");
  ASSERT_EQ(range.steps.size(), static_cast<size_t>(kSteps)) << range.output;
  EXPECT_EQ(range.steps.at(11), "kernels=1 subscribed=1") << range.output;
  EXPECT_EQ(range.steps.at(12), "kernels=0 subscribed=0") << range.output;
  EXPECT_EQ(range.finalizes, 1) << range.output;
}

TEST(CuptiLifecycle, NotWhileAStreamIsBeingCapturedIntoAGraph) {
  // A capture begins in step 0 (CUPTI subscribed) and ends in step 25.
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=1 "
                               "FAKE_GRAPH_CAPTURE_STEPS=0,25");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step : {5, 12, 22, 25}) {
    EXPECT_EQ(got.steps.at(step), "kernels=0 subscribed=1") << "step " << step << "\n" << got.output;
  }
  // The gap's first step end after the capture ended (25) lets CUPTI go.
  EXPECT_EQ(got.steps.at(26), "kernels=0 subscribed=0") << got.output;
  EXPECT_EQ(got.steps.at(35), "kernels=0 subscribed=0") << got.output;
  EXPECT_EQ(got.finalizes, 3) << got.output;  // after steps 25, 31 and 41
}

// cuptiFinalize broke a CUDA-graph job on an H100 (CUDA 13.0): once the job
// has launched a graph, CUPTI is never finalized, between windows or at
// detach; it stays subscribed with its kinds off, or is unsubscribed.
TEST(CuptiLifecycle, NeverFinalizedOnceTheJobLaunchedACudaGraph) {
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=1 "
                               "FAKE_GRAPH_LAUNCH_STEP=0 GPUOS_SHIM_DEBUG=1");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.finalizes, 0) << got.output;
  EXPECT_NE(got.output.find("CUDA graphs"), std::string::npos) << got.output;
}

TEST(CuptiLifecycle, DetachAfterACudaGraphUnsubscribesWithoutFinalizing) {
  const Outcome got = RunChild("FAKE_ATTACH_STEPS=20,-1 FAKE_GRAPH_LAUNCH_STEP=3");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  EXPECT_EQ(got.steps.at(19), "kernels=1 subscribed=1") << got.output;
  EXPECT_EQ(got.steps.at(20), "kernels=0 subscribed=0") << got.output;
  EXPECT_EQ(got.finalizes, 0) << got.output;
  // Without a graph the same detach finalizes (the control case).
  const Outcome plain = RunChild("FAKE_ATTACH_STEPS=20,-1");
  EXPECT_EQ(plain.steps.at(20), "kernels=0 subscribed=0") << plain.output;
  EXPECT_EQ(plain.finalizes, 1) << plain.output;
}

TEST(CuptiLifecycle, WithoutASpecEverythingStaysOnAsBefore) {
  const Outcome got = RunChild("GPUOS_CAPTURE_FINALIZE_GAP=1");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), "kernels=1 subscribed=1") << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.subscribes, 1) << got.output;
  EXPECT_EQ(got.finalizes, 0) << got.output;
}

TEST(CuptiLifecycle, TheShimStepsAsideForAnotherCuptiClient) {
  // torch.profiler subscribing in step 5: the shim hands CUPTI over
  // (kinds off, unsubscribed, not finalized) and the other client gets it.
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=off "
                               "FAKE_OTHER_CLIENT_STEP=5");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  EXPECT_EQ(got.steps.at(1), "kernels=1 subscribed=1") << got.output;
  for (int step : {5, 10, 11, 20}) {
    EXPECT_EQ(got.steps.at(step), "kernels=0 subscribed=1") << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.subscribes, 2) << got.output;  // ours, then the other client's
  EXPECT_EQ(got.finalizes, 0) << got.output;
}

TEST(CuptiLifecycle, AttachDetachAndAttachAgainAroundSuspensions) {
  // Attached mid-run (CUDA up), detached in step 25 while CUPTI is out
  // between windows, attached again in step 35.
  const Outcome got = RunChild("GPUOS_SHIM_SOCKET= GPUOS_CAPTURE=every=10,steps=2 "
                               "GPUOS_CAPTURE_FINALIZE_GAP=1 FAKE_ATTACH_STEPS=25,35");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    std::string want = InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=0";
    if (step >= 25 && step < 35) want = "kernels=0 subscribed=0";  // detached: no window
    if (step == 35) want = "kernels=0 subscribed=1";                 // attached, between windows
    EXPECT_EQ(got.steps.at(step), want) << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.subscribes, 5) << got.output;  // attach, 10, 20, attach again, 40
  EXPECT_EQ(got.finalizes, 5) << got.output;   // after 1, 11, 21, 35, 41
}

// GPUOS_CUPTI_API_TIMING=callback: the per-call timing callbacks (of
// cudaLaunchKernel and cuLaunchKernel) go off outside capture windows, and
// ours for context teardown, cudaDeviceReset and graph captures stay on.
TEST(CuptiLifecycle, TimingCallbacksAreOnInsideWindowsOnly) {
  const Outcome got = RunChild("GPUOS_CUPTI_API_TIMING=callback GPUOS_CAPTURE=every=10,steps=2 "
                               "GPUOS_CAPTURE_FINALIZE_GAP=off");
  ASSERT_EQ(got.api.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
    EXPECT_EQ(got.api.at(step), InWindow(step) ? "launch=1,1 keep=1,1,1" : "launch=0,0 keep=1,1,1")
        << "step " << step << "\n" << got.output;
  }
  // Subscribed again for each window: on there too.
  const Outcome far = RunChild("GPUOS_CUPTI_API_TIMING=callback GPUOS_CAPTURE=every=10,steps=2 "
                               "GPUOS_CAPTURE_FINALIZE_GAP=1");
  ASSERT_EQ(far.api.size(), static_cast<size_t>(kSteps)) << far.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(far.api.at(step), InWindow(step) ? "launch=1,1 keep=1,1,1" : "launch=0,0 keep=0,0,0")
        << "step " << step << "\n" << far.output;
  }
}

TEST(CuptiLifecycle, AlwaysKeepsTheTimingCallbacksOn) {
  const Outcome got = RunChild("GPUOS_CUPTI_API_TIMING=callback GPUOS_CAPTURE=every=10,steps=2 "
                               "GPUOS_CAPTURE_FINALIZE_GAP=off GPUOS_CAPTURE_API_CALLBACKS=always");
  ASSERT_EQ(got.api.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
    EXPECT_EQ(got.api.at(step), "launch=1,1 keep=1,1,1") << "step " << step << "\n" << got.output;
  }
  // Without a spec there is no window to leave: on all the time (and the
  // graph callbacks too: detach must know whether the job ran graphs).
  const Outcome no_spec = RunChild("GPUOS_CUPTI_API_TIMING=callback");
  ASSERT_EQ(no_spec.api.size(), static_cast<size_t>(kSteps)) << no_spec.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(no_spec.api.at(step), "launch=1,1 keep=1,1,1") << "step " << step << "\n" << no_spec.output;
  }
}

TEST(CuptiLifecycle, ApiRecordsNeedNoPerCallCallbacks) {
  // The default API timing (CUPTI's records): no callback of ours on a
  // launch at all, in windows or out.
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 GPUOS_CAPTURE_FINALIZE_GAP=off");
  ASSERT_EQ(got.api.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.api.at(step), "launch=0,0 keep=1,1,1") << "step " << step << "\n" << got.output;
  }
}

TEST(CuptiLifecycle, StepsFromTheCallsRhythmOpenWindowsInAJobWithoutMarks) {
  // No NVTX step ranges: one cuStreamSynchronize every 20 ms.  The shim
  // knows the rhythm at the 17th call (16 regular intervals), which begins
  // step 16; from there every=10,steps=2 wants steps 20-21, 30-31, 40-41.
  // CUPTI stays subscribed (nothing else would count the steps).
  const Outcome got = RunChild("GPUOS_CAPTURE=every=10,steps=2 FAKE_RHYTHM_PERIOD_MS=20");
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    const bool window = step >= 16 && InWindow(step);
    EXPECT_EQ(got.steps.at(step), window ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
  }
  EXPECT_EQ(got.finalizes, 0) << got.output;
  // With NVTX step ranges as well, the marks count and the rhythm does not:
  // windows from step 0 on (InWindow alone).
  const Outcome marked = RunChild("GPUOS_CAPTURE=every=10,steps=2 FAKE_RHYTHM_PERIOD_MS=20 FAKE_RHYTHM_MARKS=1");
  ASSERT_EQ(marked.steps.size(), static_cast<size_t>(kSteps)) << marked.output;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(marked.steps.at(step), InWindow(step) ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << marked.output;
  }
}

TEST(CuptiLifecycle, ASpecSentToAnAttachedJobCountsItsRhythmToo) {
  // Attached (CUPTI started mid-run), no GPUOS_CAPTURE: the spec arrives
  // as a request, which turns the step calls' callbacks on.
  const Outcome got =
      RunChild("FAKE_ATTACH_STEPS=-1,-1 FAKE_CAPTURE_REQUEST=every=10,steps=2 FAKE_RHYTHM_PERIOD_MS=20");
  ASSERT_NE(got.output.find("reply capture every=10,steps=2"), std::string::npos) << got.output;
  ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps)) << got.output;
  for (int step = 0; step < kSteps; ++step) {
    const bool window = step >= 16 && InWindow(step);
    EXPECT_EQ(got.steps.at(step), window ? "kernels=1 subscribed=1" : "kernels=0 subscribed=1")
        << "step " << step << "\n" << got.output;
  }
}

void CUPTIAPI OtherClientCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// The child: CUDA "initializes" (the driver calls InitializeInjection),
// then kSteps steps of NVTX step ranges, each making one driver call.
TEST(CuptiLifecycleChild, Steps) {
  if (getenv("GPUOS_FAKE_CUPTI_CHILD") == nullptr) GTEST_SKIP() << "run by the cases above";
  void* fake = dlopen(FakeLibrary().c_str(), RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  auto kind_enabled = reinterpret_cast<int (*)(int)>(dlsym(fake, "fake_cupti_kind_enabled"));
  auto subscribed = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_subscribed"));
  auto subscribes = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_subscribes"));
  auto finalizes = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_finalizes"));
  auto begin_capture = reinterpret_cast<void (*)()>(dlsym(fake, "fake_cupti_begin_graph_capture"));
  auto end_capture = reinterpret_cast<void (*)()>(dlsym(fake, "fake_cupti_end_graph_capture"));
  auto driver_call = reinterpret_cast<int (*)(void**)>(dlsym(fake, "cuCtxGetCurrent"));
  auto callback_on = reinterpret_cast<int (*)(int, uint32_t)>(dlsym(fake, "fake_cupti_callback_enabled"));
  auto graph_launch = reinterpret_cast<void (*)()>(dlsym(fake, "fake_cupti_graph_launch"));
  int capture_begin = -1, capture_end = -1, other_client = -1, graph_step = -1;
  if (const char* step = getenv("FAKE_GRAPH_LAUNCH_STEP")) graph_step = atoi(step);
  if (const char* step = getenv("FAKE_OTHER_CLIENT_STEP")) other_client = atoi(step);
  int detach = -1, attach_again = -1;
  const char* attach = getenv("FAKE_ATTACH_STEPS");
  if (attach != nullptr) sscanf(attach, "%d,%d", &detach, &attach_again);
  if (const char* steps = getenv("FAKE_GRAPH_CAPTURE_STEPS")) {
    sscanf(steps, "%d,%d", &capture_begin, &capture_end);
  }
  // FAKE_RHYTHM_PERIOD_MS: a synchronize every that many ms, on an absolute
  // schedule (so that a late wake-up does not shift the ones after), and no
  // NVTX step ranges unless FAKE_RHYTHM_MARKS is set.
  auto stream_sync = reinterpret_cast<int (*)(void*)>(dlsym(fake, "cuStreamSynchronize"));
  const char* period_text = getenv("FAKE_RHYTHM_PERIOD_MS");
  const uint64_t period_ns = period_text != nullptr ? strtoull(period_text, nullptr, 10) * 1000000 : 0;
  const bool ranges = period_ns == 0 || getenv("FAKE_RHYTHM_MARKS") != nullptr;
  std::string status;
  if (attach != nullptr) {
    ASSERT_TRUE(StartCuptiForAttach(&status)) << status;
  } else {
    InitializeInjection();
  }
  // FAKE_CAPTURE_REQUEST: the spec comes over the control socket once
  // collection runs, as `gpuos-trace --pid PID --capture SPEC` sends it.
  if (const char* request = getenv("FAKE_CAPTURE_REQUEST")) {
    printf("reply %s\n", HandleCaptureRequest(request).c_str());
  }
  ASSERT_TRUE(CuptiActivityActive());
  const uint32_t tid = CurrentTid();
  const uint64_t start_ns = MonotonicNs();
  for (int step = 0; step < kSteps; ++step) {
    const std::string name = "step " + std::to_string(step);
    if (ranges) CaptureOnRangeBegin("", name, MonotonicNs(), tid);
    void* context = nullptr;
    driver_call(&context);
    if (period_ns != 0) {
      const uint64_t due = start_ns + (step + 1) * period_ns;
      timespec at{static_cast<time_t>(due / 1000000000), static_cast<long>(due % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) != 0) {
      }
      stream_sync(nullptr);
    }
    if (step == graph_step) graph_launch();
    if (step == capture_begin) begin_capture();
    if (step == capture_end) end_capture();
    if (step == detach) StopCuptiForDetach();
    if (step == attach_again) {
      EXPECT_TRUE(StartCuptiForAttach(&status)) << status;
    }
    if (step == other_client) {
      // Through the shim's interposed cuptiSubscribe, as a later client's
      // call reaches it.
      CUpti_SubscriberHandle handle = nullptr;
      EXPECT_EQ(cuptiSubscribe(&handle, OtherClientCallback, nullptr), CUPTI_SUCCESS);
    }
    printf("step %d kernels=%d subscribed=%d\n", step,
           kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), subscribed());
    printf("api %d launch=%d,%d keep=%d,%d,%d\n", step,
           callback_on(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
           callback_on(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
           callback_on(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
           callback_on(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020),
           callback_on(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2));
    if (ranges) CaptureOnRangeEnd("", name, MonotonicNs(), tid);
  }
  printf("counts %d %d\n", subscribes(), finalizes());
  fflush(stdout);
}

}  // namespace
}  // namespace gpuos_shim
