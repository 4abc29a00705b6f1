// Steps from the repeating sequence of the work itself (step_finder.h
// sources 3, 4 and 6) through StepLocator on constructed event streams: a
// PyTorch-like loop whose backward kernels come from the autograd thread,
// named by joining the calls to their kernel records; an attached trace
// with uprobe-recorded driver calls only (no kernel names); a job with no
// CUDA, by its threads' blocking points; loss.backward() marks for a loop
// that updates by hand; an RL loop whose environment step repeats, folded
// with its updates into one step; the order of the sources; and fixed
// windows, with the reason, when nothing repeats.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/step_analysis.h"
#include "analysis/step_finder.h"
#include "analysis/step_options.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 5'000 * kMs;
constexpr uint32_t kPid = 7000;
constexpr uint32_t kAutograd = 7003;

StepPlan Locate(const std::vector<v1::Event>& events, const v1::TraceHeader* header = nullptr,
                const v1::TraceTrailer* trailer = nullptr) {
  auto locator = StepLocator::Create(StepOptions());
  EXPECT_TRUE(locator.ok()) << locator.status();
  if (header != nullptr) (*locator)->SetHeader(*header);
  if (trailer != nullptr) (*locator)->SetTrailer(*trailer);
  for (const v1::Event& e : events) (*locator)->Add(e);
  return (*locator)->Finish();
}

// Writes a PyTorch-like loop: per step a 4 ms wait for data, the input's
// host-to-device copy, 30 forward kernels from the main thread, 30 backward
// kernels from the autograd thread, 6 optimizer kernels and loss.item()'s
// copy back; every call joined to its GPU record by correlation id.
class Loop {
 public:
  explicit Loop(bool kernel_records = true) : records_(kernel_records) {}

  void Step(int variant = 0) {
    now_ += 4 * kMs;  // waiting for the batch
    step_starts_.push_back(now_);
    Copy(kPid, v1::MEMCPY_HTOD, 64 * 3 * 224 * 224 * 4);
    for (int k = 0; k < 30; ++k) Launch(kPid, absl::StrCat("fwd_kernel_", k, variant ? "_small" : ""));
    for (int k = 0; k < 30; ++k) Launch(kAutograd, absl::StrCat("bwd_kernel_", k));
    for (int k = 0; k < 6; ++k) Launch(kPid, absl::StrCat("sgd_kernel_", k % 2));
    Copy(kPid, v1::MEMCPY_DTOH, 4);
  }
  void Launch(uint32_t tid, const std::string& kernel) {
    const uint32_t corr = ++corr_;
    events_.push_back(Api(tid, "cudaLaunchKernel_v7000", corr));
    if (records_) {
      v1::Event k;
      k.set_ts_ns(now_ + 50 * kUs);
      k.set_pid(kPid);
      k.mutable_gpu_kernel()->set_name(kernel);
      k.mutable_gpu_kernel()->set_correlation_id(corr);
      k.mutable_gpu_kernel()->set_duration_ns(20 * kUs);
      events_.push_back(k);
    }
    now_ += 20 * kUs;
  }
  void Copy(uint32_t tid, v1::MemcpyDirection direction, uint64_t bytes) {
    const uint32_t corr = ++corr_;
    events_.push_back(Api(tid, "cudaMemcpyAsync_v3020", corr));
    v1::Event m;
    m.set_ts_ns(now_ + 10 * kUs);
    m.set_pid(kPid);
    m.mutable_gpu_memcpy()->set_direction(direction);
    m.mutable_gpu_memcpy()->set_bytes(bytes);
    m.mutable_gpu_memcpy()->set_correlation_id(corr);
    events_.push_back(m);
    now_ += 100 * kUs;
  }
  v1::Event Api(uint32_t tid, const std::string& name, uint32_t corr) {
    v1::Event e;
    e.set_ts_ns(now_);
    e.set_pid(kPid);
    e.set_tid(tid);
    e.mutable_cuda_api()->set_name(name);
    e.mutable_cuda_api()->set_duration_ns(5 * kUs);
    e.mutable_cuda_api()->set_correlation_id(corr);
    return e;
  }
  void Wait(uint64_t ns) { now_ += ns; }
  std::vector<v1::Event>& events() { return events_; }
  const std::vector<uint64_t>& step_starts() const { return step_starts_; }
  uint64_t now() const { return now_; }

 private:
  bool records_;
  uint64_t now_ = kT0;
  uint32_t corr_ = 0;
  std::vector<v1::Event> events_;
  std::vector<uint64_t> step_starts_;
};

TEST(StepPeriodTest, KernelSequenceAcrossTheMainAndAutogradThreads) {
  Loop loop;
  for (int i = 0; i < 40; ++i) loop.Step();
  // Records arrive late and out of order in a real trace.
  std::vector<v1::Event> events = loop.events();
  std::mt19937 rng(3);
  std::shuffle(events.begin(), events.end(), rng);
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  EXPECT_STREQ(StepSourceName(plan.source), "repeating_kernel_sequence");
  EXPECT_EQ(plan.pid, kPid);
  // Each step starts where the loop waits for data, before the input copy.
  EXPECT_EQ(plan.anchor_name, "memcpy HTOD 38535168 B");
  ASSERT_EQ(plan.steps.size(), 39u);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    // The end of loss.item()'s copy call of the step before (the first
    // step starts with the trace).
    const uint64_t start = i == 0 ? loop.step_starts()[0] : loop.step_starts()[i] - 4 * kMs - 100 * kUs + 5 * kUs;
    EXPECT_EQ(plan.steps[i].start_ns, start) << i;
    EXPECT_TRUE(plan.steps[i].left_out.empty()) << plan.steps[i].left_out;
  }
  EXPECT_NE(plan.note.find("68 tokens each"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("the iteration's host-to-device input copy"), std::string::npos) << plan.note;
}

TEST(StepPeriodTest, AChangedLastBatchIsLeftOutWithTheReason) {
  Loop loop;
  for (int i = 0; i < 20; ++i) loop.Step();
  loop.Step(/*variant=*/1);  // a smaller last batch: other kernel variants
  loop.Copy(kPid, v1::MEMCPY_HTOD, 64 * 3 * 224 * 224 * 4);  // an evaluation starts
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  ASSERT_EQ(plan.steps.size(), 21u);
  EXPECT_NE(plan.steps.back().left_out.find("end of the run"), std::string::npos) << plan.steps.back().left_out;
  EXPECT_TRUE(plan.steps.back().warmup);  // kept out of the summaries
  EXPECT_NE(plan.note.find("step 20: end of the run"), std::string::npos) << plan.note;

  // Through the analysis: the left-out step is a step, not a measured one.
  v1::TraceHeader header;
  auto a = AnalyzeStepEvents(header, loop.events(), StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->source, StepSource::kRepeatingKernelSequence);
  EXPECT_EQ(a->steps.size(), 21u);
  EXPECT_EQ(a->measured_steps, 19u);  // less the warm-up step and the last batch
  EXPECT_FALSE(a->steps.back().left_out.empty());
}

TEST(StepPeriodTest, UprobeCallsOnlyInAnAttachedTrace) {
  // Driver calls recorded by uprobes: no correlation ids, no kernel
  // records; a launch is named by its grid and block.
  std::vector<v1::Event> events;
  uint64_t t = kT0 + kMs;
  auto call = [&](const std::string& name, uint32_t grid, uint64_t bytes) {
    v1::Event e;
    e.set_ts_ns(t);
    e.set_pid(kPid);
    e.set_tid(kPid);
    e.mutable_cuda_api()->set_name(name);
    e.mutable_cuda_api()->set_driver(true);
    e.mutable_cuda_api()->set_from_uprobe(true);
    e.mutable_cuda_api()->set_duration_ns(4 * kUs);
    e.mutable_cuda_api()->set_grid_x(grid);
    e.mutable_cuda_api()->set_block_x(grid ? 256 : 0);
    e.mutable_cuda_api()->set_bytes(bytes);
    events.push_back(e);
    t += 15 * kUs;
  };
  std::vector<uint64_t> copies;
  for (int i = 0; i < 30; ++i) {
    t += 6 * kMs;
    copies.push_back(t);
    call("cuMemcpyHtoDAsync_v2", 0, 1 << 20);
    for (int k = 0; k < 50; ++k) call("cuLaunchKernel", 1 + k % 7, 0);
    call("cuMemcpyDtoHAsync_v2", 0, 4);
    call("cuStreamSynchronize", 0, 0);
  }
  v1::TraceHeader header;
  header.mutable_attach()->add_target_pids(kPid);
  header.mutable_attach()->set_start_ns(kT0);
  v1::TraceTrailer trailer;
  trailer.set_attach_end_ns(t + kMs);
  StepPlan plan = Locate(events, &header, &trailer);
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  EXPECT_EQ(plan.anchor_name, "cuMemcpyHtoDAsync 1048576 B");
  EXPECT_EQ(plan.steps.size(), 29u);
  EXPECT_NE(plan.note.find("0 named by their GPU records"), std::string::npos) << plan.note;
}

TEST(StepPeriodTest, NoPeriodGivesFixedWindowsWithTheReason) {
  Loop loop(/*kernel_records=*/true);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> kernel(0, 60);
  for (int i = 0; i < 2000; ++i) {
    loop.Launch(kPid, absl::StrCat("k", kernel(rng)));
    if (i % 37 == 0) loop.Copy(kPid, v1::MEMCPY_HTOD, 1000 + kernel(rng));
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kFixedWindows) << plan.note;
  EXPECT_NE(plan.note.find("no repeating unit in the GPU work of process 7000"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("fixed windows"), std::string::npos) << plan.note;
}

TEST(StepPeriodTest, OptimizerRangesComeBeforeTheKernelSequence) {
  Loop loop;
  for (int i = 0; i < 10; ++i) {
    loop.Step();
    v1::Event r;
    r.set_ts_ns(loop.now() - 200 * kUs);
    r.set_pid(kPid);
    r.set_tid(kPid);
    r.mutable_nvtx_range()->set_name("optimizer.step");
    r.mutable_nvtx_range()->set_duration_ns(100 * kUs);
    loop.events().push_back(r);
  }
  StepPlan plan = Locate(loop.events());
  EXPECT_EQ(plan.source, StepSource::kOptimizerSteps) << plan.note;
}

TEST(StepPeriodTest, OptimizerStepsHoldingAnEvaluationPassAreLeftOut) {
  // 30 steps; after the 15th, an evaluation pass (8 batches: input copy
  // and 30 forward-only kernels each) falls into the 16th step; the 22nd
  // waits 40 ms more for its batch (a data stall: the same work).
  Loop loop;
  for (int i = 0; i < 30; ++i) {
    if (i == 22) loop.Wait(40 * kMs);
    loop.Step();
    v1::Event r;
    r.set_ts_ns(loop.now() - 200 * kUs);
    r.set_pid(kPid);
    r.set_tid(kPid);
    r.mutable_nvtx_range()->set_name("optimizer.step");
    r.mutable_nvtx_range()->set_duration_ns(100 * kUs);
    loop.events().push_back(r);
    if (i == 15) {
      for (int b = 0; b < 8; ++b) {
        loop.Copy(kPid, v1::MEMCPY_HTOD, 4096);
        for (int k = 0; k < 30; ++k) loop.Launch(kPid, absl::StrCat("eval_fwd_kernel_", k));
      }
    }
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kOptimizerSteps) << plan.note;
  ASSERT_EQ(plan.steps.size(), 29u);
  for (const StepWindow& w : plan.steps) {
    EXPECT_EQ(!w.left_out.empty(), w.index == 16) << "step " << w.index << ": " << w.left_out;
  }
  EXPECT_TRUE(plan.steps[15].warmup);
  EXPECT_NE(plan.steps[15].left_out.find("an evaluation pass or checkpoint"), std::string::npos);
  EXPECT_NE(plan.note.find("left out of the summaries: step 16: extra work"), std::string::npos) << plan.note;
}

v1::Event Backward(uint64_t start, uint64_t end, uint32_t tid) {
  v1::Event r;
  r.set_ts_ns(start);
  r.set_pid(kPid);
  r.set_tid(tid);
  r.mutable_nvtx_range()->set_name("autograd.backward");
  r.mutable_nvtx_range()->set_domain("gpuos.python");
  r.mutable_nvtx_range()->set_duration_ns(end - start);
  return r;
}

TEST(StepPeriodTest, BackwardRangesMakeStepsOfAHandWrittenUpdate) {
  Loop loop;
  std::vector<uint64_t> ends;
  for (int i = 0; i < 12; ++i) {
    loop.Step();
    ends.push_back(loop.now() - 300 * kUs);
    loop.events().push_back(Backward(ends.back() - 2 * kMs, ends.back(), kPid));
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kBackwardRanges) << plan.note;
  EXPECT_STREQ(StepSourceName(plan.source), "backward_ranges");
  ASSERT_EQ(plan.steps.size(), 11u);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    EXPECT_EQ(plan.steps[i].start_ns, ends[i]);
    EXPECT_EQ(plan.steps[i].end_ns, ends[i + 1]);
  }
  EXPECT_EQ(plan.tid, kPid);
}

v1::Event Blocked(uint64_t ts, uint64_t duration, uint32_t tid, v1::OffCpuCause cause, int32_t nr) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(kPid);
  e.set_tid(tid);
  e.mutable_off_cpu()->set_duration_ns(duration);
  e.mutable_off_cpu()->set_cause(cause);
  e.mutable_off_cpu()->set_syscall_nr(nr);
  e.mutable_off_cpu()->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
  e.mutable_off_cpu()->set_prev_state(cause != v1::OFF_CPU_CAUSE_PREEMPTED ? 1 : 0);
  return e;
}

TEST(StepPeriodTest, CpuActivityWhenThereIsNoCuda) {
  // A CPU trainer: per step the main thread waits for its batch (a futex),
  // its intra-op helper blocks twice (forward, backward), a large tensor is
  // mapped and unmapped; random preemptions in between are noise.
  std::vector<v1::Event> events;
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint64_t> jitter(0, 300 * kUs);
  uint64_t t = kT0;
  std::vector<uint64_t> waits;
  for (int i = 0; i < 25; ++i) {
    waits.push_back(t);
    events.push_back(Blocked(t, 2 * kMs, kPid, v1::OFF_CPU_CAUSE_FUTEX, 202));
    t += 2 * kMs + jitter(rng);
    v1::Event m;
    m.set_ts_ns(t);
    m.set_pid(kPid);
    m.set_tid(kPid);
    m.mutable_mmap()->set_length(8 << 20);
    m.mutable_mmap()->set_duration_ns(20 * kUs);
    events.push_back(m);
    events.push_back(Blocked(t + 1 * kMs, 3 * kMs, kPid + 1, v1::OFF_CPU_CAUSE_FUTEX, 202));
    events.push_back(Blocked(t + 2 * kMs + jitter(rng), 40 * kUs, kPid, v1::OFF_CPU_CAUSE_PREEMPTED, -1));
    events.push_back(Blocked(t + 5 * kMs, 3 * kMs, kPid + 1, v1::OFF_CPU_CAUSE_FUTEX, 202));
    v1::Event u = m;
    u.set_ts_ns(t + 9 * kMs);
    u.mutable_munmap()->set_length(8 << 20);
    events.push_back(u);
    t += 12 * kMs;
  }
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kRepeatingCpuActivity) << plan.note;
  EXPECT_STREQ(StepSourceName(plan.source), "repeating_cpu_activity");
  EXPECT_EQ(plan.pid, kPid);
  ASSERT_EQ(plan.steps.size(), 24u);
  // The step starts where the main thread blocks for its batch.
  for (size_t i = 0; i < plan.steps.size(); ++i) EXPECT_EQ(plan.steps[i].start_ns, waits[i]) << i;
  EXPECT_NE(plan.note.find("main thread blocked: futex"), std::string::npos) << plan.note;
}

TEST(StepPeriodTest, NoCudaAndNoPeriodInALaunchedTraceIsNoSteps) {
  std::vector<v1::Event> events;
  std::mt19937 rng(9);
  std::uniform_int_distribution<uint64_t> gap(0, 5 * kMs);
  uint64_t t = kT0;
  for (int i = 0; i < 300; ++i) {
    t += gap(rng);
    events.push_back(Blocked(t, 100 * kUs, kPid, i % 3 ? v1::OFF_CPU_CAUSE_FUTEX : v1::OFF_CPU_CAUSE_SYSCALL,
                             static_cast<int32_t>(gap(rng) % 5)));
  }
  StepPlan plan = Locate(events);
  EXPECT_EQ(plan.source, StepSource::kNone);
  EXPECT_NE(plan.note.find("no repeating unit in the CPU activity"), std::string::npos) << plan.note;
}

// gpuos-trace's own mark of a backward pass's start
// (record/torch_backward_probes.h).
v1::Event UprobeBackward(uint64_t start, uint32_t tid) {
  v1::Event m;
  m.set_ts_ns(start);
  m.set_pid(kPid);
  m.set_tid(tid);
  m.mutable_nvtx_mark()->set_name("autograd.backward");
  m.mutable_nvtx_mark()->set_domain(kBackwardUprobeDomain);
  return m;
}

// The CPU trainer of CpuActivityWhenThereIsNoCuda, 25 steps; the main
// thread's backward pass starts about 5 ms into each.
std::vector<v1::Event> CpuLoop(std::vector<uint64_t>* backward_starts) {
  std::vector<v1::Event> events;
  uint64_t t = kT0;
  for (int i = 0; i < 25; ++i) {
    events.push_back(Blocked(t, 2 * kMs, kPid, v1::OFF_CPU_CAUSE_FUTEX, 202));
    events.push_back(Blocked(t + 3 * kMs, 3 * kMs, kPid + 1, v1::OFF_CPU_CAUSE_FUTEX, 202));
    backward_starts->push_back(t + 5 * kMs + (i % 3) * 100 * kUs);
    t += 12 * kMs;
  }
  return events;
}

TEST(StepPeriodTest, UprobeBackwardRangesComeBeforeTheCpuActivity) {
  std::vector<uint64_t> starts;
  std::vector<v1::Event> events = CpuLoop(&starts);
  for (uint64_t start : starts) events.push_back(UprobeBackward(start, kPid));
  // A user's NVTX mark of that name in another domain is not the uprobe's.
  events.push_back(UprobeBackward(starts[3] + kMs, kPid + 1));
  events.back().mutable_nvtx_mark()->set_domain("user");
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  EXPECT_STREQ(StepSourceName(plan.source), "backward_uprobe");
  EXPECT_TRUE(StepSourceIsInferred(plan.source));
  EXPECT_EQ(plan.tid, kPid);
  ASSERT_EQ(plan.steps.size(), 24u);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    EXPECT_EQ(plan.steps[i].start_ns, starts[i]);
    EXPECT_EQ(plan.steps[i].end_ns, starts[i + 1]);
  }
  EXPECT_NE(plan.note.find("a step here is one micro-batch"), std::string::npos) << plan.note;
}

TEST(StepPeriodTest, TheHooksBackwardRangesComeBeforeTheUprobesOnes) {
  std::vector<uint64_t> starts, ends;
  std::vector<v1::Event> events = CpuLoop(&starts);
  for (uint64_t start : starts) {
    events.push_back(UprobeBackward(start, kPid));
    ends.push_back(start + 3 * kMs);
    events.push_back(Backward(start - 10 * kUs, ends.back(), kPid));
  }
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kBackwardRanges) << plan.note;
  ASSERT_EQ(plan.steps.size(), 24u);
  EXPECT_EQ(plan.steps[0].end_ns, ends[1]);
}

TEST(StepPeriodTest, TheGpuWorksPeriodComesBeforeUprobeBackwardRanges) {
  // Gradient accumulation on the GPU: two backward passes an optimizer
  // step.  The GPU work repeats once an optimizer step; the backward
  // passes alone would make micro-batches steps.
  Loop loop;
  for (int i = 0; i < 30; ++i) {
    loop.Step();
    loop.events().push_back(UprobeBackward(loop.now() - 3 * kMs, kPid));
    loop.events().push_back(UprobeBackward(loop.now() - 1 * kMs, kPid));
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  EXPECT_EQ(plan.steps.size(), 29u);
}

TEST(StepPeriodTest, UprobeBackwardRangesWhenTheGpuWorkHasNoPeriod) {
  // Every iteration launches a different set of kernels (dynamic shapes):
  // no period in the GPU work, but one backward pass each.
  Loop loop;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> count(5, 40);
  std::vector<uint64_t> starts;
  for (int i = 0; i < 30; ++i) {
    loop.Wait(4 * kMs);
    for (int k = 0, n = count(rng); k < n; ++k) loop.Launch(kPid, absl::StrCat("kernel_", count(rng)));
    starts.push_back(loop.now());
    loop.events().push_back(UprobeBackward(loop.now(), kPid));
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  ASSERT_EQ(plan.steps.size(), 29u);
  EXPECT_EQ(plan.steps.back().end_ns, starts.back());
  EXPECT_NE(plan.note.find("no repeating unit"), std::string::npos) << plan.note;
}

}  // namespace
}  // namespace gpuos

namespace gpuos {
namespace {

TEST(StepPeriodTest, AnRlLoopsEnvironmentStepsAndUpdatesMakeOneStepAndOneList) {
  // A rollout of 32 environment steps (the policy's 4 kernels, the action's
  // copy back, the environment's 300 us), then 4 minibatch updates whose
  // kernels differ from iteration to iteration (shapes that vary), 10
  // iterations: the environment step is the repeating unit, the updates
  // (with the backward passes) are what it leaves out.
  Loop loop;
  std::mt19937 rng(5);
  std::vector<v1::Event> marks;
  for (int i = 0; i < 10; ++i) {
    for (int e = 0; e < 32; ++e) {
      for (int k = 0; k < 4; ++k) loop.Launch(kPid, absl::StrCat("policy_kernel_", k));
      loop.Copy(kPid, v1::MEMCPY_DTOH, 4);
      loop.Wait(300 * kUs);
    }
    for (int u = 0; u < 4; ++u) {
      const int variant = static_cast<int>(rng() % 5);
      for (int k = 0; k < 8; ++k) loop.Launch(kPid, absl::StrCat("update_fwd_", k, "_", variant));
      marks.push_back(UprobeBackward(loop.now(), kPid));
      for (int k = 0; k < 8; ++k) loop.Launch(kAutograd, absl::StrCat("update_bwd_", k, "_", variant));
      for (int k = 0; k < 2; ++k) loop.Launch(kPid, absl::StrCat("adam_", k));
    }
  }
  std::vector<v1::Event> events = loop.events();
  events.insert(events.end(), marks.begin(), marks.end());
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  const size_t folded = plan.note.find("an RL loop's environment step");
  ASSERT_NE(folded, std::string::npos) << plan.note;
  // The list of steps left out comes once, after the fold, and names the
  // steps of the folded plan.
  const size_t listed = plan.note.find("left out of the summaries: ");
  ASSERT_NE(listed, std::string::npos) << plan.note;
  EXPECT_GT(listed, folded) << plan.note;
  EXPECT_EQ(plan.note.find("left out of the summaries: ", listed + 1), std::string::npos) << plan.note;
  size_t measured = 0;
  for (const StepWindow& w : plan.steps) measured += w.left_out.empty();
  EXPECT_GE(measured, 8u) << plan.note;
  EXPECT_LE(plan.steps.size(), 11u) << plan.note;
}

}  // namespace
}  // namespace gpuos

namespace gpuos {
namespace {

v1::Event ThreadNamed(uint64_t ts, uint32_t tid, const std::string& comm) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(kPid);
  e.set_tid(tid);
  e.mutable_thread_start()->set_comm(comm);
  return e;
}

TEST(StepPeriodTest, ReentrantCheckpointingsBackwardCallsOnTheAutogradThreadAreNotSteps) {
  // A 6-block model under reentrant activation checkpointing (Hugging Face's
  // gradient_checkpointing): the forward runs each block once; loss.backward()
  // on the main thread, then on the autograd thread each block's forward is
  // recomputed and a backward call made from inside the backward pass, which
  // the uprobe sees as a backward pass of that thread (6 an iteration, the
  // main thread's 1).  40 iterations, no hook.
  Loop loop;
  std::vector<v1::Event> extra{ThreadNamed(kT0 - kMs, kAutograd, "pt_autograd_0")};
  std::vector<uint64_t> main_starts;
  for (int i = 0; i < 40; ++i) {
    loop.Wait(2 * kMs);
    loop.Copy(kPid, v1::MEMCPY_HTOD, 4096);
    for (int b = 0; b < 6; ++b) {
      for (int k = 0; k < 10; ++k) loop.Launch(kPid, absl::StrCat("block_fwd_", k));
    }
    main_starts.push_back(loop.now());
    extra.push_back(UprobeBackward(loop.now(), kPid));
    for (int b = 0; b < 6; ++b) {
      extra.push_back(UprobeBackward(loop.now(), kAutograd));
      for (int k = 0; k < 10; ++k) loop.Launch(kAutograd, absl::StrCat("block_fwd_", k));
      for (int k = 0; k < 12; ++k) loop.Launch(kAutograd, absl::StrCat("block_bwd_", k));
    }
    for (int k = 0; k < 4; ++k) loop.Launch(kPid, absl::StrCat("adamw_", k));
  }
  std::vector<v1::Event> events = loop.events();
  events.insert(events.end(), extra.begin(), extra.end());
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  size_t measured = 0;
  for (const StepWindow& w : plan.steps) measured += w.left_out.empty();
  EXPECT_GE(measured, 36u) << plan.note;
  EXPECT_LE(plan.steps.size(), 40u) << plan.note;

  // Without GPU work to repeat (the uprobe's marks alone), the main
  // thread's backward passes make the steps, and the note says why the
  // autograd thread's do not.
  std::vector<v1::Event> marks_only(extra.begin(), extra.end());
  plan = Locate(marks_only);
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  EXPECT_EQ(plan.tid, kPid);
  EXPECT_EQ(plan.steps.size(), 39u);
  EXPECT_NE(plan.note.find("240 more on PyTorch's autograd engine threads"), std::string::npos) << plan.note;
}

}  // namespace
}  // namespace gpuos

namespace gpuos {
namespace {

TEST(StepPeriodTest, APrefetchingThreadsCopiesAreNotPartOfTheRepeatingUnit) {
  // A background thread takes batches from the DataLoader and copies them
  // to the GPU (a queue of two ahead): its two copies fall anywhere in the
  // loop's sequence, none, one or two batches' worth an iteration.  40
  // iterations, no marks.
  constexpr uint32_t kPrefetcher = kPid + 9;
  Loop loop;
  std::mt19937 rng(7);
  int owed = 1;  // batches the prefetcher has yet to copy
  auto prefetch = [&] {
    for (int b = 0; b < owed; ++b) {
      loop.Copy(kPrefetcher, v1::MEMCPY_HTOD, 64 * 3 * 224 * 224 * 4);
      loop.Copy(kPrefetcher, v1::MEMCPY_HTOD, 64 * 8);
    }
    owed = 0;
  };
  for (int i = 0; i < 40; ++i) {
    loop.Wait((i % 4 == 3 ? 60 : 4) * kMs);  // every 4th batch is late
    ++owed;
    const int at = static_cast<int>(rng() % 70);
    const bool skip = rng() % 3 == 0;  // now and then the copy slips to the next iteration
    for (int k = 0; k < 30; ++k) {
      if (k == at && !skip) prefetch();
      loop.Launch(kPid, absl::StrCat("fwd_kernel_", k));
    }
    for (int k = 0; k < 30; ++k) {
      if (k + 30 == at && !skip) prefetch();
      loop.Launch(kAutograd, absl::StrCat("bwd_kernel_", k));
    }
    for (int k = 0; k < 6; ++k) loop.Launch(kPid, absl::StrCat("sgd_kernel_", k % 2));
    if (at >= 60 && !skip) prefetch();
    loop.Copy(kPid, v1::MEMCPY_DTOH, 4);
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kRepeatingKernelSequence) << plan.note;
  EXPECT_NE(plan.note.find("calls of 1 thread that each made under 5%"), std::string::npos) << plan.note;
  size_t measured = 0, late = 0;
  for (const StepWindow& w : plan.steps) {
    if (!w.left_out.empty()) continue;
    ++measured;
    late += w.end_ns - w.start_ns > 50 * kMs;
  }
  EXPECT_GE(measured, 38u) << plan.note;
  EXPECT_GE(late, 9u) << "the late batches' steps are measured: " << plan.note;
}

}  // namespace
}  // namespace gpuos

namespace gpuos {
namespace {

TEST(StepPeriodTest, EnvironmentStepsBeforeUpdatesAtNoFixedCountLeaveTheStepsToTheBackwardPasses) {
  // CleanRL's DQN attached mid-run (H200, 2026-11-29): every environment
  // step with an epsilon-greedy action from the network copies its
  // observations in, runs the forward pass and copies the actions back;
  // one with a random action makes no CUDA call.  After 10 environment
  // steps, one update (a backward pass).  The forward pass is the repeating
  // unit, but the updates come after a varying number of them: the
  // sequence made 0.5 ms steps of an 11 ms iteration.  The backward passes
  // mark the iterations instead.
  Loop loop;
  std::mt19937 rng(5);
  std::bernoulli_distribution greedy(0.8);
  std::vector<uint64_t> updates;
  for (int i = 0; i < 60; ++i) {
    for (int env = 0; env < 10; ++env) {
      loop.Wait(300 * kUs);  // the environment's step in numpy
      if (!greedy(rng)) continue;
      loop.Copy(kPid, v1::MEMCPY_HTOD, 64);
      for (int k = 0; k < 4; ++k) loop.Launch(kPid, absl::StrCat("policy_kernel_", k));
      loop.Copy(kPid, v1::MEMCPY_DTOH, 32);
    }
    updates.push_back(loop.now());
    loop.events().push_back(UprobeBackward(loop.now(), kPid));
    for (int k = 0; k < 40; ++k) loop.Launch(kPid, absl::StrCat("update_kernel_", k));
  }
  StepPlan plan = Locate(loop.events());
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  ASSERT_EQ(plan.steps.size(), 59u);
  EXPECT_EQ(plan.steps.front().start_ns, updates.front());
  EXPECT_EQ(plan.steps.back().end_ns, updates.back());
  EXPECT_NE(plan.note.find("the unit is part of an iteration"), std::string::npos) << plan.note;
}

}  // namespace
}  // namespace gpuos
