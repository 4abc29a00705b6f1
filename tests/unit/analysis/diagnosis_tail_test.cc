// The tail-aware part of the diagnosis: intermittent stalls (steps far
// beyond the median) named with their cost and cause beside the typical
// step's bottleneck, gains per finding, and "no single dominant bottleneck"
// only when no stage passes kDominantStageShare and no finding gains more
// than kStallCostShare.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/intermittent_stalls.h"
#include "analysis/step_analysis.h"
#include "support/diagnosis_sim.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

using namespace diagnosis_sim;

constexpr int kSteps = 21;  // the first is warmup: 20 measured

// (sum over stalled steps of duration - median) / measured wall, computed
// here from the steps themselves.
double StallCost(const StepAnalysis& a, const std::vector<size_t>& stalled) {
  std::vector<double> d;
  for (const StepRecord& s : a.steps) {
    if (!s.warmup) d.push_back(static_cast<double>(s.duration_ns()));
  }
  std::sort(d.begin(), d.end());
  const double median = d.size() % 2 ? d[d.size() / 2] : (d[d.size() / 2 - 1] + d[d.size() / 2]) / 2;
  double excess = 0;
  for (size_t i : stalled) excess += a.steps[i].duration_ns() - median;
  return excess / a.measured_wall_ns;
}

// The seeds' copy-stream variant: batches are copied on a copy stream and
// kernels fill ~99% of the median step, but in one step in ten the data
// loader is late and the GPU waits ~2x a step for it.  Over all steps
// kernels are ~82% of the time, so the GPU-bound rule alone (over the
// mean) would miss it and say "no single dominant bottleneck".
TEST(DiagnosisTailTest, CopyStreamGpuBoundWithIntermittentDataStalls) {
  Sim sim(4);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.StreamWait(kCompute, kCopyStream);
    sim.GetBatch(i == 6 || i == 16 ? 65 * kMs : 0, 100 * kUs);
    sim.Copy(2 * kMs, /*pinned_async=*/true, kCopyStream);
    for (int k = 0; k < 30; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  ASSERT_EQ(a.measured_steps, 20u);
  EXPECT_LT(static_cast<double>(a.measured_total.gpu.kernel_busy_ns) / a.measured_wall_ns, kGpuBoundKernelShare)
      << "the mean over all steps is not GPU-bound: the tail is what the test is about";

  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound) << Describe(d);
  const IntermittentStalls& s = d.stalls;
  ASSERT_EQ(s.stalled.size(), 2u);
  EXPECT_EQ(a.steps[s.stalled[0]].index, 6u);
  EXPECT_EQ(a.steps[s.stalled[1]].index, 16u);
  ASSERT_TRUE(s.MainStage().has_value());
  EXPECT_EQ(*s.MainStage(), Stage::kDataLoading);
  ASSERT_TRUE(s.MainIdleCause().has_value());
  EXPECT_EQ(*s.MainIdleCause(), IdleCause::kDataWaitFutex);
  EXPECT_GT(s.typical_total.gpu.kernel_busy_ns, kGpuBoundKernelShare * s.typical_wall_ns);

  const Finding* stall = FindingOf(d, Bottleneck::kIntermittentStalls);
  ASSERT_NE(stall, nullptr) << Describe(d);
  const double cost = StallCost(a, s.stalled);
  EXPECT_GT(cost, 0.15);
  EXPECT_LT(cost, 0.20);
  ASSERT_TRUE(stall->gain.has_value());
  EXPECT_NEAR(*stall->gain, cost, 1e-6);
  EXPECT_NEAR(stall->score, cost, 1e-6);
  EXPECT_EQ(d.headline,
            absl::StrFormat("GPU-bound, with intermittent data stalls costing %.1f%% of the run", cost * 100));
  EXPECT_NE(stall->evidence.find("2 of 20 measured steps (about one step in 10)"), std::string::npos)
      << stall->evidence;
  EXPECT_NE(stall->evidence.find("data loading +"), std::string::npos) << stall->evidence;
  EXPECT_NE(stall->recommendation.find("prefetch_factor"), std::string::npos);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kNoneDominant));
  EXPECT_FALSE(HasFinding(d, Bottleneck::kSerializedCopies)) << Describe(d);

  // The rule on its own says the same.
  auto direct = IntermittentStallsRule(DiagnosisInputs{a, s});
  ASSERT_TRUE(direct.has_value());
  EXPECT_NEAR(*direct->gain, cost, 1e-6);
}

// Evaluation every fifth step: the stalls are GPU work, and periodic.
TEST(DiagnosisTailTest, PeriodicStallsAreNamedWithTheirPeriod) {
  Sim sim(4);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(0, 100 * kUs);
    const int kernels = i > 0 && i % 5 == 0 ? 60 : 30;
    for (int k = 0; k < kernels; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  Diagnosis d = Diagnose(a);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound) << Describe(d);
  ASSERT_EQ(d.stalls.stalled.size(), 4u);  // steps 5, 10, 15, 20
  EXPECT_EQ(d.stalls.every_nth, 5u);
  ASSERT_TRUE(d.stalls.MainStage().has_value());
  EXPECT_EQ(*d.stalls.MainStage(), Stage::kGpuCompute);
  const Finding* stall = FindingOf(d, Bottleneck::kIntermittentStalls);
  ASSERT_NE(stall, nullptr) << Describe(d);
  EXPECT_NE(stall->evidence.find("(every 5 steps)"), std::string::npos) << stall->evidence;
  EXPECT_NE(stall->recommendation.find("every 5 steps"), std::string::npos) << stall->recommendation;
  EXPECT_NE(d.headline.find("GPU-bound, with intermittent GPU-work stalls costing"), std::string::npos)
      << d.headline;
}

// torch.compile's first iterations: three slow steps at the start are a
// start-up cost, said as such, not "intermittent".
TEST(DiagnosisTailTest, SlowFirstStepsAreStartUpNotIntermittent) {
  Sim sim(4);
  for (int i = 0; i < kSteps; ++i) {
    sim.BeginStep();
    sim.GetBatch(0, 100 * kUs);
    if (i >= 1 && i <= 3) sim.Cpu(80 * kMs);  // compiling
    for (int k = 0; k < 30; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  Diagnosis d = Diagnose(sim.Analyze());
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound) << Describe(d);
  ASSERT_EQ(d.stalls.stalled.size(), 3u);
  EXPECT_TRUE(d.stalls.at_start);
  EXPECT_EQ(d.stalls.every_nth, 0u);
  const Finding* stall = FindingOf(d, Bottleneck::kIntermittentStalls);
  ASSERT_NE(stall, nullptr) << Describe(d);
  EXPECT_NE(stall->evidence.find("3 of 20 measured steps (the first measured steps)"), std::string::npos)
      << stall->evidence;
  EXPECT_NE(stall->recommendation.find("--warmup-steps 4"), std::string::npos) << stall->recommendation;
  EXPECT_NE(d.headline.find("GPU-bound, with slow start-up steps costing"), std::string::npos) << d.headline;

  // The same three slow steps later in the run are intermittent.
  Sim later(4);
  for (int i = 0; i < kSteps; ++i) {
    later.BeginStep();
    later.GetBatch(0, 100 * kUs);
    if (i == 2 || i == 9 || i == 17) later.Cpu(80 * kMs);
    for (int k = 0; k < 30; ++k) later.Launch(1 * kMs, kCompute);
    later.Sync();
    later.EndStep();
  }
  d = Diagnose(later.Analyze());
  EXPECT_FALSE(d.stalls.at_start);
  EXPECT_NE(d.headline.find("GPU-bound, with intermittent stalls costing"), std::string::npos) << d.headline;
}

// Jitter of +-10% is not a stall; one step 30% over the median is a stall
// that costs too little to be a finding.
TEST(DiagnosisTailTest, JitterAndCheapStallsAreNoFinding) {
  auto run = [](int slow_step, uint64_t slow_extra) {
    Sim sim(4);
    for (int i = 0; i < kSteps; ++i) {
      sim.BeginStep();
      sim.GetBatch(0, 100 * kUs);
      for (int k = 0; k < 30; ++k) sim.Launch(1 * kMs, kCompute);
      sim.Sync();
      sim.Cpu(i % 2 ? 3 * kMs : 0);  // 30 ms +- 5%
      if (i == slow_step) sim.Cpu(slow_extra);
      sim.EndStep();
    }
    return sim.Analyze();
  };
  StepAnalysis jitter = run(-1, 0);
  Diagnosis d = Diagnose(jitter);
  EXPECT_FALSE(d.stalls.found()) << Describe(d);
  EXPECT_EQ(d.headline, "GPU-bound");

  StepAnalysis cheap = run(7, 12 * kMs);
  d = Diagnose(cheap);
  ASSERT_EQ(d.stalls.stalled.size(), 1u) << Describe(d);
  EXPECT_LT(d.stalls.share_of_run, kStallCostShare);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kIntermittentStalls)) << Describe(d);
  EXPECT_EQ(d.headline, "GPU-bound");
}

// ---- "No single dominant bottleneck" only under its conditions ----------
// Twenty measured steps of exact spans, 1000 ns each (after an empty warmup
// step): a kernel of `kernel_ns`, a data fetch of `data_ns` with the GPU
// idle, the rest the thread running other code.  Stalled steps (ordinals in
// `stalled`) are `stall_ns` longer, preempted for that long.
StepAnalysis Balanced(uint64_t kernel_ns, uint64_t data_ns, const std::vector<int>& stalled = {},
                      uint64_t stall_ns = 0) {
  std::vector<v1::Event> events;
  auto range = [&](uint64_t start, uint64_t end, const std::string& name) {
    v1::Event e = Ev(start);
    e.mutable_nvtx_range()->set_duration_ns(end - start);
    e.mutable_nvtx_range()->set_name(name);
    events.push_back(e);
  };
  uint64_t t = 1000;
  range(0, t, "step 0");
  for (int i = 1; i <= 20; ++i) {
    const bool stall = std::find(stalled.begin(), stalled.end(), i) != stalled.end();
    const uint64_t len = 1000 + (stall ? stall_ns : 0);
    range(t, t + len, absl::StrFormat("step %d", i));
    range(t, t + data_ns, "get batch");
    v1::Event k = Ev(t + data_ns, kPid, 0);
    k.mutable_gpu_kernel()->set_duration_ns(kernel_ns);
    k.mutable_gpu_kernel()->set_stream(kCompute);
    events.push_back(k);
    if (stall) {
      v1::Event off = Ev(t + 1000);
      off.mutable_off_cpu()->set_duration_ns(stall_ns);
      off.mutable_off_cpu()->set_runqueue_ns(stall_ns);
      off.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_PREEMPTED);
      events.push_back(off);
    }
    t += len;
  }
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : StepAnalysis();
}

TEST(DiagnosisTailTest, NoneDominantOnlyWhenNoStagePassesFortyPercent) {
  // GPU compute 40.0%, data loading 29%, other 31%: nothing dominates.
  Diagnosis d = Diagnose(Balanced(400, 290));
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kNoneDominant) << Describe(d);
  EXPECT_TRUE(d.secondary.empty()) << Describe(d);
  EXPECT_FALSE(d.primary.gain.has_value());
  EXPECT_NE(d.primary.evidence.find("no stage passes 40%"), std::string::npos) << d.primary.evidence;
  EXPECT_EQ(d.headline, "no single dominant bottleneck");

  // GPU compute 40.1%: one stage dominates.
  d = Diagnose(Balanced(401, 290));
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDominantStage) << Describe(d);
  EXPECT_EQ(d.headline, "GPU compute dominates the step (40.1% of step time)");

  // The thread running other code 41%: that stage dominates.
  d = Diagnose(Balanced(300, 290));
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDominantStage) << Describe(d);
  EXPECT_NE(d.primary.evidence.find("the largest stage is other at 41.0%"), std::string::npos)
      << d.primary.evidence;
}

TEST(DiagnosisTailTest, NoneDominantOnlyWhenNoFindingGainsMoreThanFivePercent) {
  // Two steps preempted for 600 ns: 1200 of 21200 ns (5.7%) over the median.
  StepAnalysis stalled = Balanced(400, 290, {4, 14}, 600);
  Diagnosis d = Diagnose(stalled);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kIntermittentStalls) << Describe(d);
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_NEAR(*d.primary.gain, 1200.0 / 21200, 1e-9);
  ASSERT_TRUE(d.stalls.MainStage().has_value());
  EXPECT_EQ(*d.stalls.MainStage(), Stage::kOsOverhead);
  EXPECT_EQ(d.headline, "intermittent OS stalls costing 5.7% of the run");

  // 400 ns each: 800 of 20800 ns (3.8%), under the 5% a finding needs.
  d = Diagnose(Balanced(400, 290, {4, 14}, 400));
  EXPECT_EQ(d.stalls.stalled.size(), 2u);
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kNoneDominant) << Describe(d);
}

// Secondary findings come by expected gain, unestimated gains last.
TEST(DiagnosisTailTest, SecondaryFindingsAreRankedByGain) {
  // Serialized copies in every step (~6%), GPU-bound typical steps, and
  // two data stalls costing more than the copies.
  Sim sim(8);
  for (int i = 0; i < 11; ++i) {
    sim.BeginStep();
    sim.GetBatch(i == 4 || i == 7 ? 20 * kMs : 0, 100 * kUs);
    sim.Copy(3 * kMs, /*pinned_async=*/true, kCompute);
    for (int k = 0; k < 30; ++k) sim.Launch(1500 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  Diagnosis d = Diagnose(sim.Analyze());
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kSerializedCopies) << Describe(d);
  ASSERT_EQ(d.secondary.size(), 2u) << Describe(d);
  EXPECT_EQ(d.secondary[0].bottleneck, Bottleneck::kIntermittentStalls);
  EXPECT_EQ(d.secondary[1].bottleneck, Bottleneck::kGpuBound);
  ASSERT_TRUE(d.secondary[0].gain.has_value());
  EXPECT_GT(*d.secondary[0].gain, *d.primary.gain);
  EXPECT_FALSE(d.secondary[1].gain.has_value());
  EXPECT_NE(d.headline.find("copies serialized with compute, with intermittent data stalls costing"),
            std::string::npos)
      << d.headline;
}

TEST(DiagnosisTailTest, TooFewStepsHaveNoTail) {
  Sim sim;
  for (int i = 0; i < 5; ++i) {  // 4 measured
    sim.BeginStep();
    sim.GetBatch(i == 3 ? 50 * kMs : 0, 100 * kUs);
    for (int k = 0; k < 10; ++k) sim.Launch(1 * kMs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  StepAnalysis a = sim.Analyze();
  IntermittentStalls s = FindIntermittentStalls(a);
  EXPECT_EQ(s.steps_considered, 0u);
  EXPECT_FALSE(s.found());
  EXPECT_EQ(s.typical_wall_ns, a.measured_wall_ns);
}

}  // namespace
}  // namespace gpuos
