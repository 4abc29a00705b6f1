// Communication recognized from a rank's waits: gloo's pattern (a device
// loop woken by the network, workers woken by it, the training thread
// woken by the workers) and NCCL kernels, per step, and what compute hid.
#include "analysis/communication.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

constexpr uint32_t kMain = 100, kLoop = 101, kWorker = 102, kOther = 103;
constexpr int32_t kEpoll = 232, kFutex = 202;
constexpr uint64_t kMs = 1'000'000;

ThreadWait Wait(uint32_t tid, uint64_t from_ms, uint64_t to_ms, int32_t nr, uint32_t waker, bool intr = false) {
  ThreadWait w;
  w.tid = tid;
  w.start_ns = from_ms * kMs;
  w.end_ns = to_ms * kMs;
  w.syscall_nr = nr;
  w.waker_tid = waker;
  w.waker_pid = waker == 0 ? 0 : 1;
  w.blocked = true;
  w.from_interrupt = intr;
  return w;
}

CommunicationInput GlooRank() {
  CommunicationInput in;
  in.driving_tid = kMain;
  in.network_syscalls = {kEpoll};
  // Two steps of 100 ms: [0,100), [100,200).  In each, the training thread
  // computes until 60, then waits for the allreduce until 90 (woken by the
  // gloo worker); the worker waits for the peer's data from 40 to 88
  // (woken by the loop, which the network woke).
  for (uint64_t s : {0, 100}) {
    in.waits.push_back(Wait(kLoop, s + 0, s + 88, kEpoll, 0, /*intr=*/true));
    in.waits.push_back(Wait(kWorker, s + 0, s + 30, kFutex, kMain));  // waits for work
    in.waits.push_back(Wait(kWorker, s + 40, s + 88, kFutex, kLoop));  // waits for the peer
    in.waits.push_back(Wait(kMain, s + 60, s + 90, kFutex, kWorker));
    // A thread woken by the training thread only: not communication.
    in.waits.push_back(Wait(kOther, s + 10, s + 95, kFutex, kMain));
  }
  return in;
}

TEST(Communication, GlooThreadsAndExposedWait) {
  CommunicationAnalysis c = AnalyzeCommunication(GlooRank(), {{0, 100 * kMs}, {100 * kMs, 200 * kMs}});
  EXPECT_EQ(c.network_threads, std::vector<uint32_t>{kLoop});
  EXPECT_EQ(c.comm_threads, (std::vector<uint32_t>{kLoop, kWorker}));
  ASSERT_EQ(c.steps.size(), 2u);
  for (const StepCommunication& s : c.steps) {
    // The worker's wait for the peer [40,88) and the main thread's [60,90).
    EXPECT_EQ(s.comm_ns, 50 * kMs);
    // Only while the training thread was off the CPU: [60,90).
    EXPECT_EQ(s.exposed_ns, 30 * kMs);
  }
  // The ends of the worker's waits for the peer, each in its step (what a
  // merge aligns clocks by); not its wait for work, not the loop's own.
  EXPECT_EQ(c.steps[0].collective_ends_ns, std::vector<uint64_t>{88 * kMs});
  EXPECT_EQ(c.steps[1].collective_ends_ns, std::vector<uint64_t>{188 * kMs});
}

TEST(Communication, AFewStoreReadsDoNotMakeTheTrainingThreadANetworkThread) {
  CommunicationInput in = GlooRank();
  // Start-up reads from the store, woken by the network, among its waits.
  in.waits.push_back(Wait(kMain, 1, 2, kEpoll, 0, /*intr=*/true));
  in.waits.push_back(Wait(kMain, 3, 4, kEpoll, 0, /*intr=*/true));
  for (uint64_t at : {5, 7, 9}) in.waits.push_back(Wait(kMain, at, at + 1, kFutex, kOther));
  in.driving_tid = 0;  // classified before the driving thread is known
  CommunicationThreads t = ClassifyCommunicationThreads(in);
  EXPECT_FALSE(t.network.contains(kMain));
  EXPECT_FALSE(t.comm.contains(kMain));
  EXPECT_TRUE(t.comm.contains(kWorker));
  // Half of a thread's waits on the network makes it one.
  in.waits.push_back(Wait(kOther, 1, 2, kEpoll, 0, /*intr=*/true));
  in.waits.push_back(Wait(kOther, 3, 4, kEpoll, 0, /*intr=*/true));
  EXPECT_TRUE(ClassifyCommunicationThreads(in).network.contains(kOther));
}

TEST(Communication, TimerWokenPollsOfOneWaitAreNotANetworkThread) {
  CommunicationInput in = GlooRank();
  for (ThreadWait& w : in.waits) w.from_interrupt = false;  // no network wakeups
  CommunicationAnalysis c = AnalyzeCommunication(in, {{0, 100 * kMs}});
  EXPECT_TRUE(c.comm_threads.empty());
  EXPECT_EQ(c.steps[0].comm_ns, 0u);
}

TEST(Communication, WokenByAnotherRankIsNetwork) {
  CommunicationInput in = GlooRank();
  for (ThreadWait& w : in.waits) {
    if (w.tid == kLoop) w.from_interrupt = false, w.waker_tid = 900, w.waker_pid = 77;
  }
  in.peer_pids = {77};
  CommunicationAnalysis c = AnalyzeCommunication(in, {{0, 100 * kMs}});
  EXPECT_EQ(c.network_threads, std::vector<uint32_t>{kLoop});
  EXPECT_EQ(c.steps[0].exposed_ns, 30 * kMs);
}

TEST(Communication, NcclKernelsHiddenByComputeKernels) {
  CommunicationInput in;
  in.driving_tid = kMain;
  in.kernels.push_back({10 * kMs, 50 * kMs, /*nccl=*/true});
  in.kernels.push_back({0, 30 * kMs, /*nccl=*/false});
  // The training thread waits (off the CPU) from 20 to 60.
  in.waits.push_back(Wait(kMain, 20, 60, kFutex, 0));
  CommunicationAnalysis c = AnalyzeCommunication(in, {{0, 100 * kMs}});
  EXPECT_EQ(c.steps[0].comm_ns, 40 * kMs);
  // [30,50): NCCL running, no compute kernel, the thread off the CPU.
  EXPECT_EQ(c.steps[0].exposed_ns, 20 * kMs);
  EXPECT_TRUE(IsNcclKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(IsNcclKernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_FALSE(IsNcclKernel("void at::native::vectorized_elementwise_kernel<4>"));
}

}  // namespace
}  // namespace gpuos
