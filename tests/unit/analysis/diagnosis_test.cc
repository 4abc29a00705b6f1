// The bottleneck rules, on simulated traces of the seeds' experiments
// (diagnosis_sim.h).  Then each threshold is checked at its edge.
#include "analysis/diagnosis.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/diagnosis_rule_support.h"
#include "analysis/step_analysis.h"
#include "support/diagnosis_sim.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

using namespace diagnosis_sim;

constexpr int kSteps = 11;  // the first is warmup
double Share(uint64_t part, uint64_t whole) { return static_cast<double>(part) / whole; }

// ResNet-style training with DataLoader's default single-process loading:
// the training thread decodes each batch itself, twice as long as the GPU
// needs for it (the first Nsight article: GPU idle ~50%).
TEST(DiagnosisTest, BaselineSingleProcessLoadingIsDataLoaderStarvation) {
  Sim sim;
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(0, 60 * kMs);
    sim.Copy(2 * kMs, /*pinned_async=*/false, kCompute);
    for (int k = 0; k < 28; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Cpu(1 * kMs);
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDataLoader) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_GE(Share(t.cpu.data_wait_ns, a.measured_wall_ns), kDataWaitShare);
  EXPECT_GE(Share(t.gpu.idle_ns, a.measured_wall_ns), kGpuIdleHighShare);
  EXPECT_DOUBLE_EQ(d.primary.score, Share(t.stages[static_cast<size_t>(Stage::kDataLoading)], a.measured_wall_ns));
  EXPECT_NE(d.primary.evidence.find(absl::StrFormat("%.1f%%", 100 * Share(t.gpu.idle_ns, a.measured_wall_ns))),
            std::string::npos)
      << d.primary.evidence;
  EXPECT_NE(d.primary.recommendation.find("num_workers"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("no data worker processes"), std::string::npos);
  // Gain: the exposed data loading removed.
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, d.primary.score);
  EXPECT_NE(d.primary.evidence.find("Expected gain"), std::string::npos) << d.primary.evidence;
}

// Eight workers: batches arrive at once, but the pageable synchronous copy
// and the munmap after it keep the GPU idle (the article's second trace).
TEST(DiagnosisTest, EightWorkersWithPageableCopiesAndMunmap) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(4 * kMs, /*pinned_async=*/false, kCompute);
    sim.Munmap(12 * kMs, 64 << 20);
    for (int k = 0; k < 30; ++k) sim.Launch(500 * kUs, kCompute);
    sim.Cpu(1 * kMs);
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  EXPECT_EQ(a.worker_processes, 8u);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kPageableCopies) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kDataLoader)) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_GT(t.gpu_idle[static_cast<size_t>(IdleCause::kMunmap)], 0u);
  EXPECT_EQ(t.api.pageable_memcpy, static_cast<uint64_t>(kSteps - 1));
  EXPECT_DOUBLE_EQ(d.primary.score, Share(t.exposed_pageable_copy_ns + t.exposed_mm_ns, a.measured_wall_ns));
  EXPECT_NE(d.primary.recommendation.find("pin_memory=True"), std::string::npos);
  EXPECT_NE(d.primary.recommendation.find("non_blocking=True"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("munmap"), std::string::npos);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, d.primary.score);
}

// pin_memory + non_blocking: the CPU no longer blocks, but copy and compute
// run one after the other on the same stream (the article's third trace).
TEST(DiagnosisTest, PinnedNonBlockingCopiesSerializedWithCompute) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(8 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) sim.Launch(500 * kUs, kCompute);
    sim.Cpu(1 * kMs);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kPageableCopies)) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu.htod_on_kernel_stream_ns, t.gpu.htod_ns);
  EXPECT_EQ(t.gpu.copy_overlap_ns, 0u);
  EXPECT_DOUBLE_EQ(d.primary.score, Share(t.gpu.copy_only_ns, a.measured_wall_ns));
  EXPECT_NE(d.primary.recommendation.find("separate CUDA stream"), std::string::npos);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, d.primary.score);
}

// A copy stream prefetching batch N+1 while batch N computes: copies overlap
// the kernels and the GPU stays busy (the article's 2x speed-up).
TEST(DiagnosisTest, PrefetchOnACopyStreamLeavesTheGpuAsTheBottleneck) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.StreamWait(kCompute, kCopyStream);
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(8 * kMs, /*pinned_async=*/true, kCopyStream);
    for (int k = 0; k < 30; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kSerializedCopies)) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu.htod_on_kernel_stream_ns, 0u);
  EXPECT_GT(t.gpu.copy_overlap_ns, t.gpu.memcpy_ns / 2);
}

// Pinned copies on the kernels' stream costing ~6% of every step, and two
// steps stalled on data (the H200 ResNet-18 pinned run): the copies are
// the finding, though the stalls make the GPU idle longer than it copies.
TEST(DiagnosisTest, SmallSerializedCopiesInEveryStepBesideAFewDataStalls) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(i == 4 || i == 7 ? 20 * kMs : 0, 100 * kUs);
    sim.Copy(3 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) sim.Launch(1500 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  EXPECT_GT(a.measured_total.gpu.idle_ns, a.measured_total.gpu.copy_only_ns);
  EXPECT_LT(d.primary.score, kSerializedCopyShare);
}

// The same copies in two steps only: not every step pays, no finding.
TEST(DiagnosisTest, CopiesInAFewStepsAreNotSerializedCopies) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(0, 100 * kUs);
    if (i == 4 || i == 7) sim.Copy(12 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) sim.Launch(1500 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_GE(static_cast<double>(a.measured_total.gpu.copy_only_ns) / a.measured_wall_ns, kSerializedCopyBusyGpuShare);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kSerializedCopies)) << Describe(d);
}

// A one-layer model's step up to its sync: its batch and pinned copy, then
// 30 microsecond kernels with launch calls and framework code between them.
void TinyModelWork(Sim& sim) {
  sim.GetBatch(50 * kUs, 50 * kUs);
  sim.Copy(10 * kUs, /*pinned_async=*/true, kCompute);
  for (int k = 0; k < 30; ++k) {
    sim.Launch(3 * kUs, kCompute);
    sim.Cpu(20 * kUs);
  }
}

// A one-layer model: microsecond kernels, and the thread spends its time in
// launch calls and framework code between them (the ECS 251 hypothesis).
TEST(DiagnosisTest, TinyModelIsLaunchBound) {
  Sim sim(2);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    TinyModelWork(sim);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu.kernels_started, 31u * (kSteps - 1) - (kSteps - 1));  // 30 kernels a step
  EXPECT_LE(t.gpu.kernels_started_ns / t.gpu.kernels_started, kShortKernelNs);
  EXPECT_GT(t.gpu_idle[static_cast<size_t>(IdleCause::kLaunching)], 0u);
  EXPECT_NE(d.primary.recommendation.find("capture the step in a CUDA graph"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("30 kernels per step"), std::string::npos) << d.primary.evidence;
  // Gain: CUDA graphs halve the GPU idle spent waiting on the CPU.
  const uint64_t cpu_idle = t.gpu_idle[static_cast<size_t>(IdleCause::kLaunching)] +
                            t.gpu_idle[static_cast<size_t>(IdleCause::kOtherCpu)] +
                            t.gpu_idle[static_cast<size_t>(IdleCause::kOtherCudaApi)];
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, kGraphIdleReduction * Share(cpu_idle, a.measured_wall_ns));
  EXPECT_EQ(a.practices.graph_launches, 0u);
  EXPECT_EQ(a.practices.kernel_launches, 30u * (kSteps - 1));
}

// A ~400M-parameter model: long kernels; input handling is noise.
TEST(DiagnosisTest, BigModelIsGpuBound) {
  Sim sim(4);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 200 * kUs);
    sim.Copy(1 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 20; ++k) sim.Launch(10 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound) << Describe(d);
  EXPECT_TRUE(d.secondary.empty()) << Describe(d);
  EXPECT_GE(d.primary.score, kGpuBoundKernelShare);
  EXPECT_NE(d.primary.recommendation.find("AMP"), std::string::npos);
  EXPECT_FALSE(d.primary.gain.has_value()) << "the kernel speed-up is not in the trace";
  EXPECT_EQ(d.headline, "GPU-bound");
}

// Sixteen workers on a few cores: the training thread keeps getting
// preempted between launches.
TEST(DiagnosisTest, TooManyWorkersIsCpuContention) {
  Sim sim(16);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(100 * kUs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) {
      sim.Launch(40 * kUs, kCompute, 10 * kUs);
      sim.Cpu(50 * kUs);
      if (k % 3 == 2) {
        sim.WorkerSwitch(k % 16, false, 200 * kUs);
        sim.Preempt(300 * kUs);
      }
    }
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kCpuContention) << Describe(d);
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.os.launching.involuntary, 10u * (kSteps - 1));
  EXPECT_EQ(t.os.workers.involuntary, 10u * (kSteps - 1));
  EXPECT_DOUBLE_EQ(d.primary.score,
                   Share(t.off_cpu.preempted_ns + t.off_cpu.runqueue_ns, a.measured_wall_ns));
  EXPECT_NE(d.primary.recommendation.find("lower num_workers (now 16)"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("16 data worker processes"), std::string::npos);
  // Gain: only the preemption that left the GPU idle.
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain,
                   Share(t.gpu_idle[static_cast<size_t>(IdleCause::kPreemptedRunqueue)], a.measured_wall_ns));
  EXPECT_LT(*d.primary.gain, d.primary.score);
}

// ---- What the job already does ---------------------------------------------

// The same small model under torch.compile(mode="reduce-overhead"): three
// graph replays a step, with Python between them.  Still CPU-bound, but it
// must not be told to capture the step in a CUDA graph: it does.
TEST(DiagnosisPracticesTest, GraphCapturedMlpIsToldWhatIsLeft) {
  auto run = [](int eager_launches) {
    Sim sim(2);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      sim.GetBatch(50 * kUs, 50 * kUs);
      sim.Copy(10 * kUs, /*pinned_async=*/true, kCompute);
      for (int g = 0; g < 3; ++g) {
        sim.GraphLaunch(10, 3 * kUs, kCompute);
        sim.Cpu(150 * kUs);
      }
      for (int k = 0; k < eager_launches; ++k) sim.Launch(3 * kUs, kCompute);  // an eager optimizer
      sim.Sync();
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis a = run(0);
  EXPECT_EQ(a.practices.graph_launches, 3u * (kSteps - 1));
  EXPECT_EQ(a.practices.kernel_launches, 0u);
  EXPECT_EQ(a.practices.graph_kernels, a.practices.kernels);
  EXPECT_TRUE(a.practices.GraphsInUse(a.measured_steps));
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_EQ(d.primary.recommendation.find("capture the step in a CUDA graph"), std::string::npos)
      << d.primary.recommendation;
  EXPECT_EQ(d.primary.recommendation.find("use torch.compile"), std::string::npos) << d.primary.recommendation;
  EXPECT_NE(d.primary.recommendation.find("already replayed from CUDA graphs"), std::string::npos);
  EXPECT_NE(d.primary.recommendation.find("raise the batch size"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("3.0 graph launches"), std::string::npos) << d.primary.evidence;
  // Nothing is left for graphs to capture: no gain is claimed for them.
  EXPECT_FALSE(d.primary.gain.has_value()) << d.primary.gain_model;
  EXPECT_EQ(LaunchBoundRule(DiagnosisInputs{a, d.stalls})->recommendation, d.primary.recommendation);

  // With an eager optimizer after the graphs: the launches left outside.
  a = run(12);
  d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("12.0 kernel launches per step are still outside the graphs"),
            std::string::npos)
      << d.primary.recommendation;
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_GT(*d.primary.gain, 0);
  const double launching =
      Share(a.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kLaunching)], a.measured_wall_ns);
  EXPECT_DOUBLE_EQ(*d.primary.gain, launching * 12.0 / 15.0);
}

// Graph replays with 600 us of torch.compile's own work between them (its
// guards, the graph tree's bookkeeping): long stretches with no CUDA call
// that end in a launch, the framework's, not the job's.  They stay
// launch-bound's code between replays, and host CPU work is not named.
TEST(DiagnosisPracticesTest, LongStretchesBetweenGraphReplaysAreTheFrameworksNotHostWork) {
  Sim sim(2);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    for (int g = 0; g < 3; ++g) {
      sim.GraphLaunch(10, 3 * kUs, kCompute);
      sim.Cpu(600 * kUs);
    }
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  ASSERT_TRUE(a.practices.GraphsInUse(a.measured_steps));
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], 0u);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kHostCpuWork)) << Describe(d);
  const double between = Share(t.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)] +
                                   t.gpu_idle[static_cast<size_t>(IdleCause::kOtherCpu)],
                               a.measured_wall_ns);
  EXPECT_NE(d.primary.evidence.find(absl::StrFormat("running other code %.1f%%", 100 * between)), std::string::npos)
      << d.primary.evidence;
  EXPECT_EQ(d.primary.evidence.find("not counted here"), std::string::npos) << d.primary.evidence;
}

// A diffusion model's training step on the H200 (2026-11-29): between
// bursts of short kernels the thread ran 0.3-2 ms with no CUDA call inside
// the optimizer's step, clip_grad_norm_ and an EMA update over tensor lists
// (Python-side bookkeeping per parameter), 5-6 ms a step in all.  Those
// stretches end in a launch: the framework's code between launches, which
// fusing or capturing shortens.  The same stretches ending in a copy to the
// device are the job making data for the GPU: host CPU work.
TEST(DiagnosisTest, LongStretchesEndingInALaunchAreTheFrameworksEndingInACopyTheJobs) {
  auto run = [](bool copy_after) {
    Sim sim(2);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      for (int g = 0; g < 3; ++g) {
        sim.Cpu(600 * kUs);
        if (copy_after) sim.Copy(5 * kUs, true, kCompute);
        for (int k = 0; k < 10; ++k) sim.Launch(3 * kUs, kCompute, 8 * kUs);
      }
      sim.Sync();
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis framework = run(false);
  EXPECT_EQ(framework.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], 0u);
  Diagnosis d = Diagnose(framework);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kHostCpuWork)) << Describe(d);
  EXPECT_EQ(d.primary.evidence.find("not counted here"), std::string::npos) << d.primary.evidence;

  StepAnalysis job = run(true);
  // 3 x 600 us a step, less the first step's lead-in.
  EXPECT_GT(job.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], 3u * 600 * kUs * (kSteps - 2));
  Diagnosis h = Diagnose(job);
  EXPECT_TRUE(HasFinding(h, Bottleneck::kHostCpuWork)) << Describe(h);
}

// A mixture-of-experts layer as Mixtral's code writes it: per expert,
// nonzero reads the token count back (a sync), then a few short kernels.
// Launch-bound either way, but a CUDA graph cannot span the syncs: the
// recommendation names them first.
TEST(DiagnosisTest, LaunchBoundWithSyncsBetweenLaunchesNamesTheSyncsFirst) {
  auto run = [](bool read_back_per_expert) {
    Sim sim(2);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      for (int expert = 0; expert < 8; ++expert) {
        for (int k = 0; k < 5; ++k) sim.Launch(4 * kUs, kCompute);
        if (read_back_per_expert) sim.Sync();
        sim.Cpu(30 * kUs);
      }
      sim.Sync();
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis moe = run(true);
  const StepRecord& t = moe.measured_total;
  EXPECT_EQ(t.api.syncs_between_launches, 7u * moe.measured_steps);
  EXPECT_GT(t.gpu.idle_after_sync_ns, 0u);
  Diagnosis d = Diagnose(moe);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("waits for the GPU 7.0 times between its launches"), std::string::npos)
      << d.primary.recommendation;
  EXPECT_NE(d.primary.recommendation.find("first remove those the step can do without"), std::string::npos) << d.primary.recommendation;
  EXPECT_NE(d.primary.evidence.find("waited for the GPU 7.0 times per step between its launches"), std::string::npos)
      << d.primary.evidence;
  EXPECT_NE(d.primary.gain_model.find("once the 7.0 syncs per step between launches are gone"), std::string::npos);

  StepAnalysis once = run(false);
  EXPECT_EQ(once.measured_total.api.syncs_between_launches, 0u);
  Diagnosis o = Diagnose(once);
  EXPECT_EQ(o.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(o);
  EXPECT_NE(o.primary.recommendation.find("capture the step in a CUDA graph"), std::string::npos);
  EXPECT_EQ(o.primary.recommendation.find("first remove those the step can do without"), std::string::npos) << o.primary.recommendation;
}

// torch.cuda.empty_cache() after every optimizer step: the frees at the
// step's start wait for the GPU's queue to run dry, and the GPU then waits
// through the step's CPU work before its first kernel, work the CPU would
// otherwise have done while the GPU ran the queue.  The same drain by a
// loss read back reads launch-bound; by the frees, allocator churn, which
// launch-bound does not count.
TEST(DiagnosisTest, MemoryFreedAndAllocatedEveryStepIsAllocatorChurn) {
  auto run = [](bool empty_cache) {
    Sim sim;
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      if (empty_cache) {
        for (int block = 0; block < 8; ++block) sim.Free(20 * kUs);
      } else {
        sim.Sync();
      }
      sim.Cpu(2 * kMs);
      for (int k = 0; k < 80; ++k) {
        if (empty_cache && k % 10 == 0) sim.Malloc(15 * kUs);
        sim.Launch(50 * kUs, kCompute);
        sim.Cpu(10 * kUs);
      }
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis churn = run(true);
  const StepRecord& t = churn.measured_total;
  EXPECT_DOUBLE_EQ(churn.AllocationsPerStep(), 16.0);
  EXPECT_EQ(t.gpu.idle_stretches_after_allocation, churn.measured_steps);
  EXPECT_GT(t.gpu.idle_allocation_ns, t.gpu.idle_ns * 9 / 10);
  Diagnosis d = Diagnose(churn);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
  EXPECT_EQ(BottleneckKey(d.primary.bottleneck), std::string("allocator_churn"));
  EXPECT_NEAR(d.primary.score, static_cast<double>(t.gpu.idle_allocation_ns) / churn.measured_wall_ns, 1e-9);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, d.primary.score);
  EXPECT_NE(d.primary.evidence.find("16.0 times per step"), std::string::npos) << d.primary.evidence;
  EXPECT_NE(d.primary.recommendation.find("torch.cuda.empty_cache()"), std::string::npos);
  EXPECT_NE(d.primary.recommendation.find("num_alloc_retries"), std::string::npos);
  for (const Finding& f : d.secondary) EXPECT_NE(f.bottleneck, Bottleneck::kLaunchBound) << Describe(d);

  StepAnalysis synced = run(false);
  EXPECT_EQ(synced.measured_total.api.allocations, 0u);
  EXPECT_EQ(synced.measured_total.gpu.idle_allocation_ns, 0u);
  Diagnosis s = Diagnose(synced);
  EXPECT_EQ(s.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(s);
  for (const Finding& f : s.secondary) EXPECT_NE(f.bottleneck, Bottleneck::kAllocatorChurn);
}

// A step both launch-bound and draining its queue with frees: the churn is
// named first whatever the scores (the rest of the idle is read after the
// drain), and launch-bound says its reading waits for it.
TEST(DiagnosisTest, FreesThatDrainTheQueueEveryStepComeFirst) {
  Sim sim;
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    for (int block = 0; block < 4; ++block) sim.Free(50 * kUs);
    for (int k = 0; k < 80; ++k) {
      sim.Launch(10 * kUs, kCompute);
      sim.Cpu(30 * kUs);
    }
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  ASSERT_EQ(d.primary.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
  double launch_score = 0;
  for (const Finding& f : d.secondary) {
    if (f.bottleneck == Bottleneck::kLaunchBound) launch_score = f.score;
  }
  EXPECT_NE(d.primary.evidence.find("drained the GPU's queue every step"), std::string::npos) << d.primary.evidence;
  // The upper end: the churn's idle and the CPU-side idle besides it,
  // launch-bound's score.
  EXPECT_NE(d.primary.evidence.find("the gain may reach " + rule_support::Pct(d.primary.score + launch_score)),
            std::string::npos)
      << d.primary.evidence;
  EXPECT_NE(d.primary.gain_model.find("at least"), std::string::npos);
  auto launch = std::find_if(d.secondary.begin(), d.secondary.end(),
                             [](const Finding& f) { return f.bottleneck == Bottleneck::kLaunchBound; });
  ASSERT_NE(launch, d.secondary.end()) << Describe(d);
  EXPECT_GT(launch->score, d.primary.score);
  EXPECT_EQ(launch->recommendation.rfind("First remove the allocator churn", 0), 0u) << launch->recommendation;
  EXPECT_NE(launch->evidence.find("which no CUDA graph removes (allocator churn)"), std::string::npos);
}

// A cudaMalloc now and then (a new largest batch shape) is not churn.
TEST(DiagnosisTest, AnAllocationNowAndThenIsNotChurn) {
  Sim sim;
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.Sync();
    if (i % 3 == 0) sim.Malloc(3 * kMs);
    for (int k = 0; k < 20; ++k) sim.Launch(400 * kUs, kCompute);
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  EXPECT_GT(a.measured_total.api.allocations, 0u);
  EXPECT_LT(a.AllocationsPerStep(), kChurnAllocationsPerStep);
  Diagnosis d = Diagnose(a);
  EXPECT_NE(d.primary.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
  for (const Finding& f : d.secondary) EXPECT_NE(f.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
}

// Many calls in a few steps -- the cache emptied every fifth step, or an
// allocator still growing -- are stalls, not churn: the calls per step pass
// the threshold, the share of steps that make them does not.
TEST(DiagnosisTest, ManyAllocationsInAFewStepsAreNotChurn) {
  Sim sim;
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    if (i % 5 == 4) {
      for (int block = 0; block < 20; ++block) sim.Free(200 * kUs);
    }
    for (int k = 0; k < 20; ++k) {
      if (i % 5 == 0) sim.Malloc(150 * kUs);
      sim.Launch(400 * kUs, kCompute);
    }
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  EXPECT_GE(a.AllocationsPerStep(), kChurnAllocationsPerStep);
  EXPECT_GE(static_cast<double>(a.measured_total.gpu.idle_allocation_ns) / a.measured_wall_ns, kAllocatorChurnShare);
  Diagnosis d = Diagnose(a);
  EXPECT_NE(d.primary.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
  for (const Finding& f : d.secondary) EXPECT_NE(f.bottleneck, Bottleneck::kAllocatorChurn) << Describe(d);
}

// PPO with its environments in subprocesses (Stable-Baselines3's
// SubprocVecEnv): the thread waits on worker processes that are not a
// DataLoader's.  With the Python hook's marks and no fetch range the trace
// knows it; without them it says it cannot tell.
TEST(DiagnosisTest, WaitingOnEnvironmentProcessesIsNotDataLoading) {
  StepAnalysis marked = EnvironmentsInSubprocesses(/*hook=*/true, kSteps);
  EXPECT_TRUE(marked.python_hook_marks);
  EXPECT_FALSE(marked.data_fetch_ranges);
  EXPECT_EQ(marked.worker_processes, 4u);
  EXPECT_TRUE(marked.WorkersAreNotADataLoaders());
  EXPECT_GT(marked.measured_total.stages[static_cast<size_t>(Stage::kDataLoading)], 0u);
  // The idle tables name the wait for what it is: on the worker processes,
  // not on data.
  const IdleByCause& idle = marked.measured_total.gpu_idle;
  EXPECT_GT(idle[static_cast<size_t>(IdleCause::kWaitWorkerProcesses)], 0u);
  EXPECT_EQ(idle[static_cast<size_t>(IdleCause::kDataWaitBlocked)] + idle[static_cast<size_t>(IdleCause::kDataWaitFutex)],
            0u);
  EXPECT_EQ(marked.measured_total.stages[static_cast<size_t>(Stage::kDataLoading)],
            idle[static_cast<size_t>(IdleCause::kWaitWorkerProcesses)]);
  Diagnosis d = Diagnose(marked);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kWorkerProcesses) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kDataLoader)) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("more DataLoader workers will not help"), std::string::npos);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_DOUBLE_EQ(*d.primary.gain, d.primary.score);

  StepAnalysis unmarked = EnvironmentsInSubprocesses(/*hook=*/false, kSteps);
  EXPECT_FALSE(unmarked.python_hook_marks);
  EXPECT_FALSE(unmarked.WorkersAreNotADataLoaders());
  EXPECT_EQ(unmarked.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kWaitWorkerProcesses)], 0u);
  EXPECT_GT(unmarked.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kDataWaitBlocked)], 0u);
  Diagnosis u = Diagnose(unmarked);
  EXPECT_EQ(u.primary.bottleneck, Bottleneck::kDataLoader) << Describe(u);
  EXPECT_NE(u.primary.evidence.find("cannot tell whether the worker processes waited on are a DataLoader's"),
            std::string::npos)
      << u.primary.evidence;
  EXPECT_EQ(u.primary.recommendation.rfind("If the worker processes are a DataLoader's: ", 0), 0u)
      << u.primary.recommendation;
}

// Copies already pinned and async on the kernels' stream: what is left is
// overlap, not pinning.
TEST(DiagnosisPracticesTest, PinnedAsyncCopiesAreNotToldToPin) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(8 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) sim.Launch(500 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  EXPECT_EQ(a.practices.htod_copies, 10u);
  EXPECT_EQ(a.practices.htod_pinned, 10u);
  EXPECT_EQ(a.practices.htod_async, 10u);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("already from pinned memory and asynchronous"), std::string::npos)
      << d.primary.recommendation;
  EXPECT_EQ(d.primary.recommendation.find("from pinned memory with non_blocking=True"), std::string::npos);
  EXPECT_NE(d.primary.recommendation.find("separate CUDA stream"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("10 of 10 host-to-device copies from pinned memory, 10 issued async"),
            std::string::npos)
      << d.primary.evidence;
}

// non_blocking=True from pageable memory: the call still blocks; pinning
// is what is left.
TEST(DiagnosisPracticesTest, AsyncPageableCopiesAreToldToPin) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(4 * kMs, /*pinned_async=*/false, kCompute, /*async_api=*/true);
    sim.Munmap(12 * kMs, 64 << 20);
    for (int k = 0; k < 30; ++k) sim.Launch(500 * kUs, kCompute);
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  EXPECT_EQ(a.practices.htod_async, 10u);
  EXPECT_EQ(a.practices.htod_pinned, 0u);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kPageableCopies) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("already issued asynchronously"), std::string::npos)
      << d.primary.recommendation;
  EXPECT_NE(d.primary.recommendation.find("pin_memory=True"), std::string::npos);
}

// A copy stream whose copy the compute stream waits for at once: the
// stream is there, the overlap is not.
TEST(DiagnosisPracticesTest, CopyStreamWithoutOverlapIsToldToPrefetch) {
  Sim sim(8);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(1 * kMs, 500 * kUs);
    sim.Copy(8 * kMs, /*pinned_async=*/true, kCopyStream);
    sim.StreamWait(kCompute, kCopyStream);
    for (int k = 0; k < 30; ++k) sim.Launch(500 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("A copy stream is already used"), std::string::npos)
      << d.primary.recommendation;
  EXPECT_NE(d.primary.recommendation.find("prefetch one batch ahead"), std::string::npos);
}

// A data-starved job with four workers: on four CPUs more workers cannot
// help; on 32 they can; with the CPU count unknown the advice stays.
TEST(DiagnosisPracticesTest, WorkersAtTheCoreCountAreNotToldToAddWorkers) {
  auto run = [](uint32_t online_cpus) {
    Sim sim(4, online_cpus);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      sim.GetBatch(40 * kMs, 1 * kMs);
      sim.Copy(1 * kMs, /*pinned_async=*/true, kCompute);
      for (int k = 0; k < 10; ++k) sim.Launch(1 * kMs, kCompute);
      sim.Sync();
      sim.EndStep();
    }
    StepAnalysis a = sim.Analyze();
    EXPECT_EQ(a.practices.online_cpus, online_cpus);
    return Diagnose(a);
  };
  Diagnosis at = run(4);
  EXPECT_EQ(at.primary.bottleneck, Bottleneck::kDataLoader) << Describe(at);
  EXPECT_NE(at.primary.recommendation.find("already runs 4 worker processes on a host with 4 online CPUs"),
            std::string::npos)
      << at.primary.recommendation;
  EXPECT_EQ(at.primary.recommendation.find("Add DataLoader workers"), std::string::npos);
  EXPECT_NE(at.primary.evidence.find("4 data worker processes on a host with 4 online CPUs"), std::string::npos);

  Diagnosis room = run(32);
  EXPECT_EQ(room.primary.bottleneck, Bottleneck::kDataLoader);
  EXPECT_NE(room.primary.recommendation.find("Add DataLoader workers (more than the 4 now"), std::string::npos);
  EXPECT_NE(room.primary.recommendation.find("32 online CPUs"), std::string::npos);

  Diagnosis unknown = run(0);
  EXPECT_NE(unknown.primary.recommendation.find("Add DataLoader workers"), std::string::npos);
  EXPECT_EQ(unknown.primary.recommendation.find("online CPUs"), std::string::npos);
}

// One DQN-like step per loop: 10 environment steps of `env_ns` each in
// numpy, each followed by its observations' copy to the GPU, a tiny
// forward pass and its sync, then an update of 40 short kernels.
StepAnalysis DqnLoop(uint64_t env_ns) {
  Sim sim(0);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    for (int env = 0; env < 10; ++env) {
      sim.Cpu(env_ns);                  // the environment's step and the replay buffer, in numpy
      sim.Copy(2 * kUs, false, kCompute);  // its observations to the GPU
      for (int k = 0; k < 4; ++k) {
        sim.Launch(3 * kUs, kCompute);  // the policy's forward pass
        sim.Cpu(15 * kUs);
      }
      sim.Sync();  // actions back to the CPU
    }
    for (int k = 0; k < 40; ++k) {  // the update
      sim.Launch(4 * kUs, kCompute);
      sim.Cpu(20 * kUs);
    }
    sim.Sync();
    sim.EndStep();
  }
  return sim.Analyze();
}

// An RL loop (CleanRL's DQN): the GPU idles while the thread runs code far
// from any CUDA call, the job's own CPU work, not the framework's dispatch:
// the finding is host CPU work, not launch-bound, and recommends no CUDA
// graph.  With the environment's work cut to 100 us between forward
// passes, the loop is framework-paced and launch-bound as before.
TEST(DiagnosisTest, AnEnvironmentBetweenShortKernelsIsTheJobsCpuWorkNotLaunchBound) {
  StepAnalysis a = DqnLoop(400 * kUs);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kHostCpuWork) << Describe(d);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kLaunchBound)) << Describe(d);
  const StepRecord& t = a.measured_total;
  // 10 x 400 us a step away from CUDA calls, less the step's first edge.
  EXPECT_GT(t.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], 35u * 100 * kUs * (kSteps - 1));
  EXPECT_DOUBLE_EQ(d.primary.score, Share(t.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], a.measured_wall_ns));
  EXPECT_FALSE(d.primary.gain.has_value());
  EXPECT_NE(d.primary.evidence.find("no CUDA call for more than 0.2 ms"), std::string::npos) << d.primary.evidence;
  EXPECT_NE(d.primary.recommendation.find("would not shorten it"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("The trace has no data-fetch ranges"), std::string::npos) << d.primary.evidence;
  EXPECT_EQ(d.primary.recommendation.find("capture the step"), std::string::npos);

  Diagnosis launch = Diagnose(DqnLoop(100 * kUs));
  EXPECT_EQ(launch.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(launch);
  EXPECT_FALSE(HasFinding(launch, Bottleneck::kHostCpuWork)) << Describe(launch);
  EXPECT_EQ(launch.primary.evidence.find("not counted here"), std::string::npos) << launch.primary.evidence;
}

// Batch inference with the batch loaded in the training thread
// (DataLoader(num_workers=0)) and copied to the GPU: with the Python hook's
// fetch range around the loading it is data loading; without one
// (attached, --no-python-hooks) the same time is host CPU work, whose
// evidence says the trace could not tell loading from other CPU work.
TEST(DiagnosisTest, ABatchLoadedInTheThreadIsDataLoadingWithAFetchRangeAndHostWorkWithout) {
  auto run = [](bool fetch_range) {
    Sim sim(0);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      if (fetch_range) {
        sim.GetBatch(0, 5 * kMs);
      } else {
        sim.Cpu(5 * kMs);
      }
      sim.Copy(50 * kUs, true, kCompute);
      for (int k = 0; k < 20; ++k) sim.Launch(20 * kUs, kCompute);
      sim.Sync();
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis marked = run(true);
  EXPECT_TRUE(marked.data_fetch_ranges);
  Diagnosis loading = Diagnose(marked);
  EXPECT_EQ(loading.primary.bottleneck, Bottleneck::kDataLoader) << Describe(loading);
  EXPECT_FALSE(HasFinding(loading, Bottleneck::kHostCpuWork)) << Describe(loading);

  StepAnalysis unmarked = run(false);
  EXPECT_FALSE(unmarked.data_fetch_ranges);
  Diagnosis host = Diagnose(unmarked);
  EXPECT_EQ(host.primary.bottleneck, Bottleneck::kHostCpuWork) << Describe(host);
  EXPECT_NE(host.primary.evidence.find("a batch loaded in this thread (a DataLoader with num_workers=0) is counted "
                                       "here too"),
            std::string::npos)
      << host.primary.evidence;
  EXPECT_NEAR(host.primary.score, loading.primary.score, 0.01);
}

// Both: launch-bound updates beside an environment's work that takes 20% of
// the step far from CUDA calls.  Launch-bound stays primary, its evidence
// and gain leave the environment's work out, and host CPU work is the
// second finding.
TEST(DiagnosisTest, LaunchBoundUpdatesBesideSomeHostWorkNameBoth) {
  Sim sim(0);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.Cpu(1 * kMs);  // the environment's steps, in numpy
    sim.Copy(2 * kUs, false, kCompute);
    for (int k = 0; k < 160; ++k) {
      sim.Launch(3 * kUs, kCompute);
      sim.Cpu(20 * kUs);
    }
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  ASSERT_TRUE(HasFinding(d, Bottleneck::kHostCpuWork)) << Describe(d);
  const StepRecord& t = a.measured_total;
  const double host = Share(t.gpu_idle[static_cast<size_t>(IdleCause::kHostWork)], a.measured_wall_ns);
  EXPECT_GE(host, kHostWorkShare);
  EXPECT_NE(d.primary.evidence.find(absl::StrFormat("not counted here: %.1f%% of step time", 100 * host)),
            std::string::npos)
      << d.primary.evidence;
  const double cpu_side = Share(t.gpu_idle[static_cast<size_t>(IdleCause::kLaunching)] +
                                    t.gpu_idle[static_cast<size_t>(IdleCause::kOtherCpu)] +
                                    t.gpu_idle[static_cast<size_t>(IdleCause::kOtherCudaApi)],
                                a.measured_wall_ns);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_NEAR(*d.primary.gain, cpu_side * kGraphIdleReduction, 1e-9);
}

// Adding a rule is one function and one entry: each rule is listed once.
TEST(DiagnosisRuleTableTest, ListsEveryRuleOnce) {
  const std::vector<Bottleneck> expected = {Bottleneck::kGpuBound,        Bottleneck::kDataLoader,
                                            Bottleneck::kPageableCopies,  Bottleneck::kSerializedCopies,
                                            Bottleneck::kLaunchBound,     Bottleneck::kHostCpuWork,
                                            Bottleneck::kWorkerProcesses, Bottleneck::kAllocatorChurn,
                                            Bottleneck::kWorkerRestarts,  Bottleneck::kCpuContention,
                                            Bottleneck::kStraggler,
                                            Bottleneck::kIntermittentStalls};
  std::vector<Bottleneck> listed;
  for (const DiagnosisRule& r : DiagnosisRules()) {
    listed.push_back(r.bottleneck);
    EXPECT_NE(r.test, nullptr);
    EXPECT_EQ(r.steady_state, r.bottleneck != Bottleneck::kIntermittentStalls) << BottleneckKey(r.bottleneck);
  }
  EXPECT_EQ(listed, expected);
}

TEST(DiagnosisTest, NoStepsAndNoGpuActivity) {
  StepAnalysis none;
  none.note = "no NVTX range is named like a training step";
  Diagnosis d = Diagnose(none);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kNoSteps);
  EXPECT_EQ(d.primary.evidence, none.note);

  // A CPU-only run whose thread mostly waits for data.
  Sim sim;
  for (int i = 0; i < 3; ++i) {
    sim.BeginStep();
    sim.GetBatch(2 * kMs, 1 * kMs);
    sim.Cpu(1 * kMs);
    sim.EndStep();
  }
  d = Diagnose(sim.Analyze());
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kNoGpuActivity) << Describe(d);
  ASSERT_EQ(d.secondary.size(), 1u);
  EXPECT_EQ(d.secondary[0].bottleneck, Bottleneck::kDataLoader);
  EXPECT_DOUBLE_EQ(d.secondary[0].score, 0.75);
  EXPECT_EQ(d.primary.evidence.find("not recorded"), std::string::npos) << d.primary.evidence;

  // The same steps from a job that did launch GPU work whose records are
  // missing (an attach that fell back to uprobes): the report says the GPU
  // side is missing, not idle.
  StepAnalysis launched_unrecorded = sim.Analyze();
  launched_unrecorded.practices.kernel_launches = 3 * 40;
  d = Diagnose(launched_unrecorded);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kNoGpuActivity) << Describe(d);
  EXPECT_NE(d.primary.evidence.find("was not recorded"), std::string::npos) << d.primary.evidence;
  EXPECT_NE(d.primary.recommendation.find("missing, not idle"), std::string::npos) << d.primary.recommendation;
}

TEST(DiagnosisTest, StragglerOfADistributedJob) {
  Sim sim;
  for (int i = 0; i < 3; ++i) {
    sim.BeginStep();
    sim.GetBatch(2 * kMs, 1 * kMs);
    sim.Cpu(1 * kMs);
    sim.EndStep();
  }
  const StepAnalysis a = sim.Analyze();
  // No straggler: no such finding.
  for (const Finding& f : Diagnose(a).secondary) EXPECT_NE(f.bottleneck, Bottleneck::kStraggler);
  Straggler s;
  s.rank = 3;
  s.pid = 4242;
  s.cause = "data_loader";
  s.cause_detail = "rank 3's data loading took 30 ms more";
  s.cost_ns_per_step = 25 * kMs;
  s.others_step_ns = 100 * kMs;
  s.bottleneck = "data_loader_starvation";
  Diagnosis d = Diagnose(a, &s);
  const Finding* found = nullptr;
  for (const Finding& f : d.secondary) {
    if (f.bottleneck == Bottleneck::kStraggler) found = &f;
  }
  ASSERT_NE(found, nullptr) << Describe(d);
  EXPECT_DOUBLE_EQ(found->score, 0.25);
  EXPECT_NE(found->evidence.find("rank 3 (pid 4242)"), std::string::npos) << found->evidence;
  EXPECT_NE(found->evidence.find("data_loader"), std::string::npos) << found->evidence;
  EXPECT_NE(found->recommendation.find("rank 3"), std::string::npos) << found->recommendation;
}

// ---- Thresholds at their edges ---------------------------------------------
// One measured step [0, 1000) (after an empty warmup step) built from
// exact spans, so each rule's measure can be put just at or below its
// threshold.

struct Edge {
  std::vector<v1::Event> events;
  uint32_t workers = 0;
  Edge() {
    Add(Range(0, 1000, "step 0"));
    Add(Range(1000, 2000, "step 1"));
  }
  static v1::Event Range(uint64_t start, uint64_t end, const std::string& name) {
    v1::Event e = Ev(start);
    e.mutable_nvtx_range()->set_duration_ns(end - start);
    e.mutable_nvtx_range()->set_name(name);
    return e;
  }
  void Add(v1::Event e) { events.push_back(std::move(e)); }
  void Kernel(uint64_t start, uint64_t end, uint32_t stream = kCompute) {
    v1::Event e = Ev(start, kPid, 0);
    e.mutable_gpu_kernel()->set_duration_ns(end - start);
    e.mutable_gpu_kernel()->set_stream(stream);
    Add(e);
  }
  void Copy(uint64_t start, uint64_t end, uint32_t stream, v1::MemoryKind src, uint32_t corr) {
    v1::Event e = Ev(start, kPid, 0);
    e.mutable_gpu_memcpy()->set_duration_ns(end - start);
    e.mutable_gpu_memcpy()->set_direction(v1::MEMCPY_HTOD);
    e.mutable_gpu_memcpy()->set_src_kind(src);
    e.mutable_gpu_memcpy()->set_dst_kind(v1::MEMORY_DEVICE);
    e.mutable_gpu_memcpy()->set_stream(stream);
    e.mutable_gpu_memcpy()->set_correlation_id(corr);
    Add(e);
  }
  void Api(uint64_t start, uint64_t end, const std::string& name, uint32_t corr = 0) {
    v1::Event e = Ev(start);
    e.mutable_cuda_api()->set_duration_ns(end - start);
    e.mutable_cuda_api()->set_name(name);
    e.mutable_cuda_api()->set_correlation_id(corr);
    Add(e);
  }
  void Preempted(uint64_t start, uint64_t end) {
    v1::Event e = Ev(start);
    e.mutable_off_cpu()->set_duration_ns(end - start);
    e.mutable_off_cpu()->set_runqueue_ns(end - start);
    e.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_PREEMPTED);
    Add(e);
  }
  void Workers(uint32_t n) {
    for (uint32_t i = 1; i <= n; ++i) {
      v1::Event e = Ev(0, kPid + i, kPid + i);
      e.mutable_process_start()->set_ppid(kPid);
      Add(e);
    }
  }
  Diagnosis Run() const {
    auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
    EXPECT_TRUE(a.ok());
    EXPECT_EQ(a->measured_wall_ns, 1000u);
    return Diagnose(*a);
  }
};

TEST(DiagnosisThresholdTest, GpuBound) {
  Edge at;
  at.Kernel(1000, 1000 + 900);
  EXPECT_EQ(at.Run().primary.bottleneck, Bottleneck::kGpuBound);
  Edge below;
  below.Kernel(1000, 1000 + 899);
  Diagnosis d = below.Run();
  EXPECT_FALSE(HasFinding(d, Bottleneck::kGpuBound)) << Describe(d);
  // GPU compute passes 40% of the step: not "no single dominant bottleneck".
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDominantStage);
  EXPECT_NE(d.primary.evidence.find("GPU compute at 89.9%"), std::string::npos) << d.primary.evidence;
  EXPECT_EQ(d.headline, "GPU compute dominates the step (89.9% of step time)");
}

TEST(DiagnosisThresholdTest, DataLoaderNeedsBothDataWaitAndGpuIdle) {
  auto build = [](uint64_t data_ns, uint64_t kernel_ns) {
    Edge e;
    e.Add(Edge::Range(1000, 1000 + data_ns, "get batch"));
    e.Kernel(2000 - kernel_ns, 2000);
    return e.Run();
  };
  EXPECT_EQ(build(300, 700).primary.bottleneck, Bottleneck::kDataLoader);   // wait 30%, idle 30%
  EXPECT_FALSE(HasFinding(build(299, 700), Bottleneck::kDataLoader));       // wait 29.9%
  EXPECT_FALSE(HasFinding(build(300, 701), Bottleneck::kDataLoader));       // idle 29.9%
}

// Data waits known only from the GPU-idle attribution (who woke the thread,
// with no data-fetch range around the wait): the data-loading stage alone
// makes the finding at kDataWaitShare.
TEST(DiagnosisThresholdTest, DataLoaderFromTheDataLoadingStageAlone) {
  auto build = [](uint64_t data_stage_ns) {
    StepAnalysis a;
    StepRecord s;
    s.start_ns = 0;
    s.end_ns = 1000;
    s.gpu.kernel_ns = s.gpu.kernel_busy_ns = 1000 - data_stage_ns;
    s.gpu.idle_ns = data_stage_ns;
    s.gpu_idle[static_cast<size_t>(IdleCause::kDataWaitFutex)] = data_stage_ns;
    s.stages[static_cast<size_t>(Stage::kDataLoading)] = data_stage_ns;
    s.stages[static_cast<size_t>(Stage::kGpuCompute)] = 1000 - data_stage_ns;
    a.steps = {s};
    a.measured_steps = 1;
    a.measured_total = s;
    a.measured_wall_ns = 1000;
    return a;
  };
  StepAnalysis at = build(300);
  IntermittentStalls none = FindIntermittentStalls(at);
  auto f = DataLoaderRule(DiagnosisInputs{at, none});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->score, 0.3);
  EXPECT_NE(f->evidence.find("puts 30.0% of step time in waiting for data"), std::string::npos) << f->evidence;
  EXPECT_EQ(Diagnose(at).primary.bottleneck, Bottleneck::kDataLoader);
  StepAnalysis below = build(299);
  EXPECT_FALSE(DataLoaderRule(DiagnosisInputs{below, FindIntermittentStalls(below)}).has_value());
}

TEST(DiagnosisThresholdTest, PageableCopies) {
  auto build = [](uint64_t api_ns, v1::MemoryKind src) {
    Edge e;
    e.Api(1000, 1000 + api_ns, "cudaMemcpy_v3020", 5);
    e.Copy(1000, 1000 + api_ns / 2, kCompute, src, 5);
    e.Kernel(1000 + api_ns, 2000);
    return e.Run();
  };
  Diagnosis d = build(150, v1::MEMORY_PAGEABLE);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kPageableCopies) << Describe(d);
  EXPECT_DOUBLE_EQ(d.primary.score, 0.15);
  EXPECT_FALSE(HasFinding(build(149, v1::MEMORY_PAGEABLE), Bottleneck::kPageableCopies));
  // The same copy from pinned memory is not this problem.
  EXPECT_FALSE(HasFinding(build(300, v1::MEMORY_PINNED), Bottleneck::kPageableCopies));
}

TEST(DiagnosisThresholdTest, SerializedCopies) {
  // A copy of copy_ns, then (after idle_ns) a kernel to the end of the step.
  auto build = [](uint64_t copy_ns, uint32_t copy_stream, uint64_t overlap_ns, uint64_t idle_ns = 0) {
    Edge e;
    e.Copy(1000, 1000 + copy_ns + overlap_ns, copy_stream, v1::MEMORY_PINNED, 3);
    e.Kernel(1000 + copy_ns + idle_ns, 2000);
    return e.Run();
  };
  EXPECT_TRUE(HasFinding(build(100, kCompute, 0), Bottleneck::kSerializedCopies));
  // Below 10% it takes copies of >= 3% in every step (here: the one step).
  EXPECT_TRUE(HasFinding(build(99, kCompute, 0), Bottleneck::kSerializedCopies));
  EXPECT_TRUE(HasFinding(build(30, kCompute, 0), Bottleneck::kSerializedCopies));
  EXPECT_TRUE(HasFinding(build(30, kCompute, 0, /*idle_ns=*/300), Bottleneck::kSerializedCopies));
  EXPECT_FALSE(HasFinding(build(29, kCompute, 0), Bottleneck::kSerializedCopies));
  // Another stream with little overlap: still serialized ...
  EXPECT_TRUE(HasFinding(build(100, kCopyStream, 0), Bottleneck::kSerializedCopies));
  // ... but not when the copies mostly overlap kernels on their own stream.
  EXPECT_FALSE(HasFinding(build(100, kCopyStream, 400), Bottleneck::kSerializedCopies));
}

// What the ResNet-18 pinned + non_blocking run on the H200 looked like:
// kernels 93% of the step, copies alone 6% on the kernels' stream, GPU idle
// 1%.  The copy stream is the next step (it gained 6% there), so the
// serialized copies come first and GPU-bound second.
TEST(DiagnosisThresholdTest, SerializedCopiesComeBeforeGpuBound) {
  Edge e;
  e.Copy(1000, 1059, kCompute, v1::MEMORY_PINNED, 3);
  e.Kernel(1070, 2000);
  Diagnosis d = e.Run();
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  EXPECT_DOUBLE_EQ(d.primary.score, 0.059);
  ASSERT_EQ(d.secondary.size(), 1u) << Describe(d);
  EXPECT_EQ(d.secondary[0].bottleneck, Bottleneck::kGpuBound);
  EXPECT_NE(d.secondary[0].recommendation.find("Once the copies overlap"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("shorten the step by up to 5.9%"), std::string::npos) << d.primary.evidence;
}

// One rank of a DDP job that is launch-bound, as its peer is: each step's
// gradient all-reduce (an NCCL kernel on its own stream) waits for the other
// rank to reach it, so it lasts as long as the peer is behind.  That wait is
// neither GPU compute nor a long kernel of the step's own work: the rank is
// launch-bound, with the all-reduce in the communication stage.  When the
// wait is most of the step, communication dominates it.
TEST(DiagnosisTest, ARankWaitingInItsAllReduceIsStillLaunchBound) {
  const std::string all_reduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  constexpr uint32_t kNcclStream = 9;
  auto run = [&](uint64_t all_reduce_ns) {
    Sim sim(2);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      TinyModelWork(sim);
      sim.StreamWait(kNcclStream, kCompute);
      sim.Launch(all_reduce_ns, kNcclStream, 8 * kUs, all_reduce);
      sim.StreamWait(kCompute, kNcclStream);
      sim.Sync();
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis a = run(1500 * kUs);
  const StepRecord& t = a.measured_total;
  // Every kernel's mean is over kShortKernelNs; the step's own kernels' is not.
  EXPECT_GT(t.gpu.kernels_started_ns / t.gpu.kernels_started, kShortKernelNs);
  EXPECT_EQ(t.gpu.comm_kernels_started, kSteps - 1u);
  EXPECT_LE(t.gpu.compute_kernels_started_ns() / t.gpu.compute_kernels_started(), kShortKernelNs);
  EXPECT_GE(Share(t.gpu.comm_only_ns, a.measured_wall_ns), 0.5);
  EXPECT_EQ(t.stages[static_cast<size_t>(Stage::kCommunication)], t.gpu.comm_only_ns);
  EXPECT_LT(Share(t.gpu.kernel_busy_ns, a.measured_wall_ns), 0.1);
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kLaunchBound) << Describe(d);
  EXPECT_NE(d.primary.evidence.find("30 kernels per step averaging 3.0 us (besides 1.0 collectives' kernels)"),
            std::string::npos)
      << d.primary.evidence;

  // Waiting most of the step for the peer: the rank's own view is
  // communication.
  a = run(6 * kMs);
  d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDominantStage) << Describe(d);
  EXPECT_NE(d.headline.find("communication dominates the step"), std::string::npos) << d.headline;
  EXPECT_NE(d.primary.recommendation.find("collectives (NCCL)"), std::string::npos);
}

TEST(DiagnosisThresholdTest, LaunchBound) {
  // Ten kernels per step of `kernel_ns`, each after a 60 ns launch.
  auto build = [](uint64_t kernel_ns, int kernels, uint64_t launch_ns) {
    Edge e;
    uint64_t t = 1000;
    for (int i = 0; i < kernels; ++i) {
      e.Api(t, t + launch_ns, "cudaLaunchKernel_v7000");
      e.Kernel(t + launch_ns, t + launch_ns + kernel_ns);
      t += 100;
    }
    return e.Run();
  };
  EXPECT_EQ(build(40, 10, 60).primary.bottleneck, Bottleneck::kLaunchBound);  // idle 60%
  EXPECT_FALSE(HasFinding(build(40, 7, 60), Bottleneck::kLaunchBound));       // 7 kernels a step
  // From 30% idle (kGpuIdleHighShare) on: a GPU idle 49% of the time, mostly
  // while the thread launched, was once left to a 7% stall finding.
  EXPECT_EQ(build(51, 10, 49).primary.bottleneck, Bottleneck::kLaunchBound);  // idle 49%
  EXPECT_EQ(build(69, 10, 31).primary.bottleneck, Bottleneck::kLaunchBound);  // idle 31%
  EXPECT_FALSE(HasFinding(build(71, 10, 29), Bottleneck::kLaunchBound));      // idle 29%
  // Within kNearThresholdFraction of it (24-36% idle) either reading says
  // another run may read otherwise; further off, neither does.
  ASSERT_DOUBLE_EQ(kGpuIdleHighShare * (1 - kNearThresholdFraction), 0.24);
  EXPECT_FALSE(build(51, 10, 49).primary.near_threshold);
  EXPECT_FALSE(build(63, 10, 37).primary.near_threshold);  // idle 37%
  const Diagnosis just_over = build(65, 10, 35);             // idle 35%
  EXPECT_TRUE(just_over.primary.near_threshold);
  EXPECT_NE(just_over.primary.evidence.find("another run of the job may not"), std::string::npos);
  const Diagnosis just_under = build(71, 10, 29);
  EXPECT_FALSE(just_under.primary.near_threshold);
  ASSERT_TRUE(just_under.primary.near_miss.has_value()) << Describe(just_under);
  EXPECT_EQ(*just_under.primary.near_miss, Bottleneck::kLaunchBound);
  EXPECT_NE(just_under.primary.evidence.find("another run of the job may read so"), std::string::npos)
      << just_under.primary.evidence;
  EXPECT_TRUE(build(75, 10, 25).primary.near_miss.has_value());    // idle 25%
  EXPECT_FALSE(build(77, 10, 23).primary.near_miss.has_value());   // idle 23%

  // Kernels longer than kShortKernelNs on average: not a launch problem.
  Edge longer;
  longer.Api(1000, 1010, "cudaLaunchKernel_v7000");
  for (int i = 0; i < 8; ++i) longer.Kernel(1010 + i * 60, 1010 + i * 60 + (i == 0 ? 408 : 1));
  for (int i = 0; i < 8; ++i) longer.Kernel(1600 + i * 10, 1600 + i * 10 + 1);
  // 16 kernels, 423 ns in all: mean 26 ns -> launch-bound.  One more that
  // starts in the last ns of the step adds 1 ns of busy time (idle stays at
  // 58.3%) but its full length counts in the mean: no longer short kernels.
  EXPECT_EQ(longer.Run().primary.bottleneck, Bottleneck::kLaunchBound);
  longer.Kernel(1999, 1999 + kShortKernelNs * 17);
  EXPECT_FALSE(HasFinding(longer.Run(), Bottleneck::kLaunchBound));
}

TEST(DiagnosisThresholdTest, CpuContentionNeedsWorkers) {
  auto build = [](uint64_t preempted_ns, uint32_t workers) {
    Edge e;
    e.Workers(workers);
    e.Preempted(1000, 1000 + preempted_ns);
    e.Kernel(1500, 2000);
    return e.Run();
  };
  EXPECT_TRUE(HasFinding(build(100, 2), Bottleneck::kCpuContention));
  EXPECT_FALSE(HasFinding(build(99, 2), Bottleneck::kCpuContention));
  EXPECT_FALSE(HasFinding(build(400, 1), Bottleneck::kCpuContention));
}

// The straggler rule on its own: it fires for a named straggler, scored by
// the others' wait as a share of their step (at most the whole step), and
// not without one or without the others' step to weigh the wait against.
TEST(DiagnosisThresholdTest, StragglerNeedsANamedRankAndTheOthersStep) {
  const StepAnalysis a;
  const IntermittentStalls none;
  Straggler s;
  s.rank = 1;
  s.pid = 77;
  s.cause = "preemption";
  s.cost_ns_per_step = 30;
  s.others_step_ns = 100;
  auto f = StragglerRule(DiagnosisInputs{a, none, &s});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->bottleneck, Bottleneck::kStraggler);
  EXPECT_DOUBLE_EQ(f->score, 0.3);
  EXPECT_NE(f->recommendation.find("pin each rank"), std::string::npos) << f->recommendation;
  // Waits on its own threads are not "more work" to balance.
  s.cause = "thread_waits";
  f = StragglerRule(DiagnosisInputs{a, none, &s});
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->recommendation.find("waits on its own threads or a lock"), std::string::npos) << f->recommendation;
  EXPECT_EQ(f->recommendation.find("Balance the work"), std::string::npos) << f->recommendation;
  s.cost_ns_per_step = 250;
  f = StragglerRule(DiagnosisInputs{a, none, &s});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->score, 1.0);
  EXPECT_FALSE(StragglerRule(DiagnosisInputs{a, none, nullptr}).has_value());
  s.others_step_ns = 0;
  EXPECT_FALSE(StragglerRule(DiagnosisInputs{a, none, &s}).has_value());
}

}  // namespace
}  // namespace gpuos
