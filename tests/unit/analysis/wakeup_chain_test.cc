// Wakeup chains and the driving thread on constructed event streams: the
// driving thread's waits that another thread of the job ended are charged
// to the work waited for (backward, data loading), with the chain and the
// last thread's state over the wait, and never to the OS; a wait with an
// unknown or untraced waker, or one ended from an interrupt, keeps its own
// cause; the driving thread is the thread the helpers' work flows into,
// not the one with the most launches.
#include <string>
#include <vector>

#include "analysis/driving_thread.h"
#include "analysis/step_analysis.h"
#include "analysis/thread_activity.h"
#include "analysis/thread_roles.h"
#include "analysis/wakeup_chain.h"
#include "export/report/wait_chain_text.h"
#include "gtest/gtest.h"
#include "support/event_builders.h"

namespace gpuos {
namespace {

constexpr uint32_t kPid = 10;
constexpr uint32_t kMain = 10;
constexpr uint64_t kStep = 1000;
constexpr int kSteps = 4;

using test_events::Ev;
using test_events::Process;
using test_events::Thread;

v1::Event StepRange(int k) {
  v1::Event e = Ev(k * kStep, kPid, kMain);
  e.mutable_nvtx_range()->set_duration_ns(kStep);
  e.mutable_nvtx_range()->set_name("step " + std::to_string(k));
  return e;
}

v1::Event Kernel(uint64_t start, uint64_t end) {
  v1::Event e = Ev(start, kPid, 0);
  e.mutable_gpu_kernel()->set_duration_ns(end - start);
  e.mutable_gpu_kernel()->set_name("k");
  return e;
}

v1::Event Launch(uint64_t ts, uint32_t tid) {
  v1::Event e = Ev(ts, kPid, tid);
  e.mutable_cuda_api()->set_duration_ns(1);
  e.mutable_cuda_api()->set_name("cudaLaunchKernel");
  return e;
}

// Off the CPU over [start, end), woken at end - runqueue by `waker` of
// `waker_pid`.
v1::Event Off(uint32_t pid, uint32_t tid, uint64_t start, uint64_t end, v1::OffCpuCause cause, uint32_t waker,
              uint32_t waker_pid, uint64_t runqueue = 0) {
  v1::Event e = Ev(start, pid, tid);
  v1::OffCpu* off = e.mutable_off_cpu();
  off->set_duration_ns(end - start);
  off->set_runqueue_ns(cause == v1::OFF_CPU_CAUSE_PREEMPTED ? end - start : runqueue);
  off->set_cause(cause);
  off->set_syscall_nr(cause == v1::OFF_CPU_CAUSE_FUTEX ? 202 : -1);
  off->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
  off->set_woken_by_tid(waker);
  off->set_waker_pid(waker_pid);
  off->set_waker_context_known(true);
  return e;
}

StepOptions Options() {
  StepOptions o;
  o.warmup_steps = 0;
  return o;
}

size_t C(IdleCause c) { return static_cast<size_t>(c); }
size_t S(Stage s) { return static_cast<size_t>(s); }

// Every partition adds up, and every via row's states add up to its time.
void ExpectConsistent(const StepAnalysis& a) {
  for (const StepRecord& s : a.steps) {
    uint64_t stages = 0, idle = 0;
    for (uint64_t v : s.stages) stages += v;
    for (uint64_t v : s.gpu_idle) idle += v;
    EXPECT_EQ(stages, s.duration_ns());
    EXPECT_EQ(idle, s.gpu.idle_ns);
    EXPECT_EQ(s.cpu.total(), s.duration_ns());
    EXPECT_EQ(s.gpu.total(), s.duration_ns());
    for (size_t c = 0; c < kIdleCauseCount; ++c) {
      uint64_t hop0 = 0;
      for (const WaitVia& v : s.via) {
        if (v.cause == static_cast<IdleCause>(c) && v.hop == 0) hop0 += v.ns;
      }
      EXPECT_LE(hop0, s.gpu_idle[c]);
    }
    for (const WaitVia& v : s.via) {
      uint64_t states = 0;
      for (uint64_t x : v.states) states += x;
      EXPECT_EQ(states, v.ns);
    }
  }
}

// The small MLP: in loss.backward() the Python thread blocks in a futex
// until pt_autograd_0 has run the backward pass; the GPU is idle meanwhile
// (the backward kernels come after).
std::vector<v1::Event> MlpSteps(uint32_t waker_pid = kPid, bool from_interrupt = false) {
  constexpr uint32_t kAutograd = 11;
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kAutograd, "pt_autograd_0")};
  for (int k = 0; k < kSteps; ++k) {
    const uint64_t t = k * kStep;
    ev.push_back(StepRange(k));
    ev.push_back(Off(kPid, kAutograd, t, t + 100, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    v1::Event wait = Off(kPid, kMain, t + 100, t + 600, v1::OFF_CPU_CAUSE_FUTEX, from_interrupt ? 0 : kAutograd,
                         from_interrupt ? 0 : waker_pid);
    if (from_interrupt) wait.mutable_off_cpu()->set_woken_from_interrupt(true);
    ev.push_back(wait);
    ev.push_back(Off(kPid, kAutograd, t + 600, t + kStep, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    ev.push_back(Kernel(t + 600, t + 900));
  }
  return ev;
}

TEST(WakeupChainTest, WaitingForTheAutogradThreadIsBackwardNotOsOverhead) {
  auto a = AnalyzeStepEvents(v1::TraceHeader(), MlpSteps(), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->measured_steps, static_cast<size_t>(kSteps));
  const StepRecord& t = a->measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kWaitBackward)], kSteps * 500u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kFutexOther)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kDispatch)], kSteps * 500u);
  ASSERT_EQ(t.via.size(), 1u);
  EXPECT_EQ(t.via[0].tid, 11u);
  EXPECT_EQ(t.via[0].hop, 0);
  EXPECT_EQ(t.via[0].ns, kSteps * 500u);
  EXPECT_EQ(t.via[0].states[static_cast<size_t>(HopState::kRunning)], kSteps * 500u);
  ASSERT_TRUE(a->threads.contains(11));
  EXPECT_EQ(a->threads.at(11).role, ThreadRole::kAutograd);
  EXPECT_NE(WaitChainText(*a, IdleCause::kWaitBackward).find("autograd thread 11 \"pt_autograd_0\""),
            std::string::npos)
      << WaitChainText(*a, IdleCause::kWaitBackward);
  ExpectConsistent(*a);
}

TEST(WakeupChainTest, AnUntracedWakerOrAnInterruptKeepsTheWaitsOwnCause) {
  for (bool interrupt : {false, true}) {
    SCOPED_TRACE(interrupt ? "interrupt" : "untraced waker");
    // Untraced: the waker's tid is no thread of the trace.
    std::vector<v1::Event> ev = MlpSteps(kPid, interrupt);
    if (!interrupt) {
      for (v1::Event& e : ev) {
        if (e.has_off_cpu() && e.tid() == kMain) e.mutable_off_cpu()->set_woken_by_tid(999);
      }
    }
    auto a = AnalyzeStepEvents(v1::TraceHeader(), ev, Options());
    ASSERT_TRUE(a.ok()) << a.status();
    const StepRecord& t = a->measured_total;
    EXPECT_EQ(t.gpu_idle[C(IdleCause::kFutexOther)], kSteps * 500u);
    EXPECT_EQ(t.gpu_idle[C(IdleCause::kWaitBackward)], 0u);
    EXPECT_TRUE(t.via.empty());
    EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], 0u) << "a futex wait is not the kernel's cost";
    ExpectConsistent(*a);
  }
}

// A DataLoader with pin_memory on Debian's torch: the pin-memory thread
// is named like the process, so only its behaviour tells: woken by the
// worker processes, it wakes the main thread.  Worker 20 serves even steps,
// worker 21 odd ones; each is preempted for 30 ns during the wait.
std::vector<v1::Event> DataSteps(uint64_t main_runqueue = 0) {
  constexpr uint32_t kPin = 12;
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kPin, "python3"),
                               Process(20, kPid, "python3"), Process(21, kPid, "python3")};
  for (int k = 0; k < kSteps; ++k) {
    const uint64_t t = k * kStep;
    const uint32_t worker = k % 2 ? 21 : 20;
    ev.push_back(StepRange(k));
    // Main waits from 100 to 700 (+ run-queue tail), woken by the pin thread.
    ev.push_back(Off(kPid, kMain, t + 100, t + 700 + main_runqueue, v1::OFF_CPU_CAUSE_FUTEX, kPin, kPid,
                     main_runqueue));
    // The pin thread waits from 50 to 600, woken by the worker.
    ev.push_back(Off(kPid, kPin, t + 50, t + 600, v1::OFF_CPU_CAUSE_FUTEX, worker, worker));
    // The worker: preempted 400-430, blocked after handing the batch over.
    ev.push_back(Off(worker, worker, t + 400, t + 430, v1::OFF_CPU_CAUSE_PREEMPTED, 0, 0));
    ev.push_back(Off(worker, worker, t + 600, t + kStep + 50, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    ev.push_back(Kernel(t + 700 + main_runqueue, t + 900 + main_runqueue / 2));
  }
  return ev;
}

TEST(WakeupChainTest, WokenByThePinThreadThatTheWorkersWokeIsWaitingForData) {
  auto a = AnalyzeStepEvents(v1::TraceHeader(), DataSteps(), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  const StepRecord& t = a->measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDataWaitFutex)], kSteps * 600u);
  EXPECT_EQ(t.stages[S(Stage::kDataLoading)], kSteps * 600u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], 0u);
  ASSERT_TRUE(a->threads.contains(12));
  EXPECT_EQ(a->threads.at(12).role, ThreadRole::kPinMemory);
  uint64_t pin = 0, workers = 0;
  HopStates worker_states{};
  for (const WaitVia& v : t.via) {
    EXPECT_EQ(v.cause, IdleCause::kDataWaitFutex);
    if (v.hop == 0) {
      EXPECT_EQ(v.tid, 12u);
      pin += v.ns;
    } else {
      EXPECT_EQ(v.hop, 1);
      EXPECT_TRUE(v.tid == 20 || v.tid == 21) << v.tid;
      EXPECT_EQ(a->threads.at(v.tid).role, ThreadRole::kDataWorker);
      workers += v.ns;
      for (size_t i = 0; i < kHopStateCount; ++i) worker_states[i] += v.states[i];
    }
  }
  EXPECT_EQ(pin, kSteps * 600u);
  EXPECT_EQ(workers, kSteps * 600u);
  // Over each 600 ns wait the worker ran 470, was preempted 30 and then
  // blocked in futex 100 (after it handed the batch over).
  EXPECT_EQ(worker_states[static_cast<size_t>(HopState::kRunning)], kSteps * 470u);
  EXPECT_EQ(worker_states[static_cast<size_t>(HopState::kPreempted)], kSteps * 30u);
  EXPECT_EQ(worker_states[static_cast<size_t>(HopState::kFutex)], kSteps * 100u);
  const std::string text = WaitChainText(*a, IdleCause::kDataWaitFutex);
  EXPECT_NE(text.find("pin-memory thread 12"), std::string::npos) << text;
  EXPECT_NE(text.find("data workers 20"), std::string::npos) << text;
  EXPECT_NE(text.find("on-CPU 78%"), std::string::npos) << text;
  EXPECT_NE(text.find("preempted 5%"), std::string::npos) << text;
  ExpectConsistent(*a);
}

TEST(WakeupChainTest, TheRunQueueTailOfAWaitStaysOsOverhead) {
  auto a = AnalyzeStepEvents(v1::TraceHeader(), DataSteps(/*main_runqueue=*/40), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  const StepRecord& t = a->measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDataWaitFutex)], kSteps * 600u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kPreemptedRunqueue)], kSteps * 40u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], kSteps * 40u);
  ExpectConsistent(*a);
}

TEST(WakeupChainTest, ChainsStopAtTheWorkerAndNeverLoop) {
  ThreadRoles roles;
  roles.Set(1, {kPid, "main", ThreadRole::kDriving});
  roles.Set(2, {kPid, "relay-a", ThreadRole::kOther});
  roles.Set(3, {kPid, "relay-b", ThreadRole::kOther});
  roles.Set(4, {40, "w", ThreadRole::kDataWorker});
  ThreadTimelines tl;
  // 2 was woken by 3, and 3 by 2: a loop; 4 never follows.
  tl.Add(2, {100, 200, 200, 3, v1::OFF_CPU_CAUSE_FUTEX, 0, false});
  tl.Add(3, {100, 150, 150, 2, v1::OFF_CPU_CAUSE_FUTEX, 0, false});
  tl.Finish();
  WaitChain c = tl.Follow(1, 50, 300, 2, roles);
  EXPECT_EQ(c.hops, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(c.on, WaitOn::kJobThreads);
  // A worker ends the chain even when it was woken during the wait.
  ThreadTimelines tw;
  tw.Add(4, {100, 200, 200, 1, v1::OFF_CPU_CAUSE_FUTEX, 0, false});
  tw.Finish();
  c = tw.Follow(1, 50, 300, 4, roles);
  EXPECT_EQ(c.hops, (std::vector<uint32_t>{4}));
  EXPECT_EQ(c.on, WaitOn::kData);
  // An untraced waker: no chain.
  EXPECT_TRUE(tw.Follow(1, 50, 300, 77, roles).hops.empty());
  // Python's worker: its queue feeder thread (5) writes the batch to the
  // pipe once the worker's main thread (4) has put it: the chain goes on
  // to the thread that did the work, and not to the main process.
  roles.Set(5, {40, "w-feeder", ThreadRole::kDataWorker});
  ThreadTimelines tf;
  tf.Add(5, {60, 250, 250, 4, v1::OFF_CPU_CAUSE_FUTEX, 0, false});
  tf.Add(4, {40, 70, 70, 1, v1::OFF_CPU_CAUSE_FUTEX, 0, false});
  tf.Finish();
  c = tf.Follow(1, 50, 300, 5, roles);
  EXPECT_EQ(c.hops, (std::vector<uint32_t>{5, 4}));
  EXPECT_EQ(c.on, WaitOn::kData);
  // A relay that waited long for the worker (4), then traded quick
  // wakeups with another thread (6, a socket handshake) before waking the
  // driving thread: what it waited for is the worker.
  roles.Set(6, {40, "w-sharer", ThreadRole::kDataWorker});
  ThreadTimelines tr;
  tr.Add(2, {40, 240, 240, 4, v1::OFF_CPU_CAUSE_SYSCALL, 0, false});
  tr.Add(2, {250, 260, 260, 6, v1::OFF_CPU_CAUSE_SYSCALL, 0, false});
  tr.Add(2, {270, 280, 280, 6, v1::OFF_CPU_CAUSE_SYSCALL, 0, false});
  tr.Finish();
  c = tr.Follow(1, 50, 300, 2, roles);
  EXPECT_EQ(c.hops, (std::vector<uint32_t>{2, 4}));
  // The same chain through a worker process that is not a DataLoader's
  // (an environment stepped in a subprocess): its own wait, not data.
  roles.Set(4, {40, "w", ThreadRole::kWorkerProcess});
  roles.Set(5, {40, "w-feeder", ThreadRole::kWorkerProcess});
  c = tf.Follow(1, 50, 300, 5, roles);
  EXPECT_EQ(c.hops, (std::vector<uint32_t>{5, 4}));
  EXPECT_EQ(c.on, WaitOn::kWorkerProcesses);
}

// Attached to a running PyTorch job: the autograd thread made the most
// launches, the pin-memory thread a few CUDA calls; the loop's thread is
// the one their work flows into.
TEST(DrivingThreadTest, TheLoopThreadNotTheThreadWithTheMostLaunches) {
  constexpr uint32_t kAutograd = 11, kPin = 12, kCuda = 13;
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kAutograd, "pt_autograd_0"),
                               Thread(kPid, kPin, "python3"), Thread(kPid, kCuda, "cuda-EvtHandlr"),
                               Process(20, kPid, "python3")};
  for (int k = 0; k < 10; ++k) {
    const uint64_t t = k * kStep;
    for (int i = 0; i < 3; ++i) ev.push_back(Launch(t + i, kMain));
    for (int i = 0; i < 9; ++i) ev.push_back(Launch(t + 10 + i, kAutograd));
    ev.push_back(Launch(t + 30, kCuda));
    if (k < 2) ev.push_back(Launch(t + 40, kPin));
    ev.push_back(Off(kPid, kMain, t + 100, t + 200, v1::OFF_CPU_CAUSE_FUTEX, kPin, kPid));
    ev.push_back(Off(kPid, kMain, t + 300, t + 400, v1::OFF_CPU_CAUSE_FUTEX, kAutograd, kPid));
    ev.push_back(Off(kPid, kAutograd, t + 400, t + 900, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    ev.push_back(Off(kPid, kPin, t + 50, t + 150, v1::OFF_CPU_CAUSE_FUTEX, 20, 20));
  }
  ThreadActivity activity;
  for (const v1::Event& e : ev) activity.Add(e);
  StepPlan plan;
  plan.source = StepSource::kFixedWindows;
  plan.pid = kPid;
  plan.tid = kAutograd;  // what launch counts pick
  plan.thread_comm = "pt_autograd_0";
  plan.worker_pids.insert(20);
  plan.steps.push_back({0, 0, 10 * kStep, false});
  DrivingChoice choice = ChooseDrivingThread(activity, plan);
  ASSERT_TRUE(choice.chosen);
  EXPECT_EQ(choice.tid, kMain) << choice.why;
  const std::string note = ApplyDrivingThread(activity, plan);
  EXPECT_EQ(plan.tid, kMain) << note;
  EXPECT_EQ(plan.thread_comm, "python3");
  ThreadRoles roles = ThreadRoles::Assign(activity, plan);
  EXPECT_EQ(roles.RoleOf(kMain), ThreadRole::kDriving);
  EXPECT_EQ(roles.RoleOf(kAutograd), ThreadRole::kAutograd);
  EXPECT_EQ(roles.RoleOf(kPin), ThreadRole::kPinMemory);
  EXPECT_EQ(roles.RoleOf(kCuda), ThreadRole::kCuda);
  EXPECT_EQ(roles.RoleOf(20), ThreadRole::kDataWorker);
  // With the Python hook's marks, no data fetch and no worker named like a
  // DataLoader's, the same process is a worker process of the job's own.
  plan.python_hook_marks = true;
  plan.worker_processes = 1;
  ASSERT_TRUE(plan.WorkersAreNotADataLoaders());
  EXPECT_EQ(ThreadRoles::Assign(activity, plan).RoleOf(20), ThreadRole::kWorkerProcess);
  plan.data_fetch_ranges = true;
  EXPECT_EQ(ThreadRoles::Assign(activity, plan).RoleOf(20), ThreadRole::kDataWorker);
  plan.data_fetch_ranges = false;
  plan.python_hook_marks = false;

  // Steps from the thread's own ranges keep their thread.
  plan.source = StepSource::kNvtxRanges;
  plan.tid = kAutograd;
  ApplyDrivingThread(activity, plan);
  EXPECT_EQ(plan.tid, kAutograd);
}

// A CPU loop: the main thread reads batches the workers send; a queue
// feeder thread is handed indices by the main thread.  Neither calls CUDA.
TEST(DrivingThreadTest, OnTheCpuAThreadFedByAnotherIsNotTheDriver) {
  constexpr uint32_t kFeeder = 14;
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kFeeder, "python3"),
                               Process(20, kPid, "python3")};
  for (int k = 0; k < 10; ++k) {
    const uint64_t t = k * kStep;
    ev.push_back(Off(kPid, kMain, t + 100, t + 500, v1::OFF_CPU_CAUSE_SYSCALL, 20, 20));
    ev.push_back(Off(kPid, kFeeder, t + 50, t + 120, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    ev.push_back(Off(kPid, kFeeder, t + 130, t + 140, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
  }
  ThreadActivity activity;
  for (const v1::Event& e : ev) activity.Add(e);
  StepPlan plan;
  plan.source = StepSource::kFixedWindows;
  plan.pid = kPid;
  plan.tid = kFeeder;
  plan.worker_pids.insert(20);
  plan.steps.push_back({0, 0, 10 * kStep, false});
  DrivingChoice choice = ChooseDrivingThread(activity, plan);
  ASSERT_TRUE(choice.chosen);
  EXPECT_EQ(choice.tid, kMain) << choice.why;
}

}  // namespace
}  // namespace gpuos
