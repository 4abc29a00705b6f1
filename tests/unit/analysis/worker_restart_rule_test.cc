// The dataloader_worker_restarts rule on simulated loops: a DataLoader that
// starts its workers again at every epoch (spawn: seconds before the first
// batch) is named, with persistent_workers=True, and data-loader starvation
// is judged on the other steps; the same stalls with no process started,
// and restarts too cheap to matter, are not it.
#include <string>
#include <vector>

#include "analysis/diagnosis.h"
#include "analysis/diagnosis_rule_support.h"
#include "analysis/worker_restarts.h"
#include "gtest/gtest.h"
#include "support/diagnosis_sim.h"

namespace gpuos {
namespace {

using namespace diagnosis_sim;

// 40 steps of 10 ms (a batch ready in its worker, 20 kernels of 400 us);
// at the start of every 10th step (an epoch) `restart(sim)` runs, then the
// thread waits `epoch_wait` for the new workers' first batch.
StepAnalysis Epochs(uint64_t epoch_wait, void (*restart)(Sim&)) {
  Sim sim(/*worker_processes=*/2, /*online_cpus=*/16);
  for (int i = 0; i < 40; ++i) {
    sim.BeginStep();
    if (i % 10 == 0 && i > 0) {
      restart(sim);
      sim.GetBatch(epoch_wait, 100 * kUs);
    } else {
      sim.GetBatch(0, 100 * kUs);
    }
    for (int k = 0; k < 20; ++k) sim.Launch(400 * kUs, kCompute, 20 * kUs);
    sim.Sync();
    sim.EndStep();
  }
  return sim.Analyze();
}

TEST(WorkerRestartRuleTest, WorkersStartedAgainEveryEpochAreNamedFirst) {
  const StepAnalysis a = Epochs(2000 * kMs, [](Sim& sim) { sim.StartWorkers(2, /*exec=*/true, 50 * kMs); });
  const WorkerRestarts r = FindWorkerRestarts(a);
  EXPECT_EQ(r.steps, 3u);
  EXPECT_EQ(r.starts, 6u);
  EXPECT_EQ(r.execs, 6u);
  // Two at a time, eight in the run: the restarts are no reason to say the
  // loader already runs as many workers as the host has CPUs.
  EXPECT_EQ(a.worker_processes, 2u);
  EXPECT_EQ(a.worker_processes_started, 8u);
  EXPECT_EQ(rule_support::WorkersText(a),
            "2 data worker processes at a time (8 started in the run) on a host with 16 online CPUs");
  const Diagnosis d = Diagnose(a);
  ASSERT_EQ(d.primary.bottleneck, Bottleneck::kWorkerRestarts) << Describe(d);
  EXPECT_NE(d.primary.recommendation.find("persistent_workers=True"), std::string::npos);
  EXPECT_NE(d.primary.recommendation.find("spawn"), std::string::npos);
  EXPECT_NE(d.primary.evidence.find("exec'd a new interpreter"), std::string::npos);
  // 3 x ~2.05 s beyond a ~8.5 ms step, of a ~6.5 s run.
  ASSERT_TRUE(d.primary.gain.has_value());
  EXPECT_GT(*d.primary.gain, 0.9);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kDataLoader))
      << "more workers would not shorten the restarts: " << Describe(d);
  // The same three steps are not reported again as intermittent stalls.
  EXPECT_EQ(d.stalls.explained.size(), 3u);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kIntermittentStalls)) << Describe(d);
}

TEST(WorkerRestartRuleTest, AStallOfAnotherKindBesideTheRestartsIsStillAStall) {
  // Besides the restarts, step 25 writes a checkpoint for 1 s.
  Sim sim(/*worker_processes=*/2, /*online_cpus=*/16);
  for (int i = 0; i < 40; ++i) {
    sim.BeginStep();
    if (i % 10 == 0 && i > 0) {
      sim.StartWorkers(2, /*exec=*/true, 50 * kMs);
      sim.GetBatch(2000 * kMs, 100 * kUs);
    } else {
      sim.GetBatch(0, 100 * kUs);
    }
    if (i == 25) sim.Cpu(1000 * kMs);
    for (int k = 0; k < 20; ++k) sim.Launch(400 * kUs, kCompute, 20 * kUs);
    sim.Sync();
    sim.EndStep();
  }
  const StepAnalysis a = sim.Analyze();
  const Diagnosis d = Diagnose(a);
  ASSERT_EQ(d.primary.bottleneck, Bottleneck::kWorkerRestarts) << Describe(d);
  ASSERT_TRUE(HasFinding(d, Bottleneck::kIntermittentStalls)) << Describe(d);
  ASSERT_EQ(d.stalls.stalled.size(), 1u);
  EXPECT_EQ(a.steps[d.stalls.stalled[0]].os.child_starts, 0u);
  EXPECT_EQ(d.stalls.explained.size(), 3u);
  for (const Finding& f : d.secondary) {
    if (f.bottleneck != Bottleneck::kIntermittentStalls) continue;
    EXPECT_NE(f.evidence.find("1 of 39 measured steps"), std::string::npos) << f.evidence;
    EXPECT_NE(f.evidence.find("3 more steps over the threshold started DataLoader workers"), std::string::npos)
        << f.evidence;
  }
}

TEST(WorkerRestartRuleTest, TheSameStallsWithNoProcessStartedAreNot) {
  const StepAnalysis a = Epochs(2000 * kMs, [](Sim& sim) { sim.Cpu(50 * kMs); });
  EXPECT_EQ(FindWorkerRestarts(a).steps, 0u);
  const Diagnosis d = Diagnose(a);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kWorkerRestarts)) << Describe(d);
}

TEST(WorkerRestartRuleTest, AToolTheLoopRunsIsNoWorker) {
  // Every epoch the loop runs nvidia-smi and waits 2 s for it: a stall of
  // its own, but no DataLoader started anew.
  const StepAnalysis a = Epochs(1 * kMs, [](Sim& sim) { sim.RunTool("nvidia-smi", 2000 * kMs); });
  EXPECT_EQ(FindWorkerRestarts(a).steps, 0u);
  const Diagnosis d = Diagnose(a);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kWorkerRestarts)) << Describe(d);
}

TEST(WorkerRestartRuleTest, ForkedWorkersThatStartInAMomentAreNot) {
  // Forked: 2 workers in 1 ms, their first batch 2 ms later: 0.9% of the run.
  const StepAnalysis a = Epochs(2 * kMs, [](Sim& sim) { sim.StartWorkers(2, /*exec=*/false, 1 * kMs); });
  EXPECT_EQ(FindWorkerRestarts(a).steps, 3u);
  const Diagnosis d = Diagnose(a);
  EXPECT_FALSE(HasFinding(d, Bottleneck::kWorkerRestarts)) << Describe(d);
}

TEST(WorkerRestartRuleTest, AnEpochStartLeftOutAsIrregularWorkIsMeasuredAgain) {
  // Steps from the GPU work's repeating sequence: 20 launches each; step 5
  // merges an epoch's last, partial batch with the next epoch's first and
  // started 4 workers (left out as irregular); step 8 is an evaluation whose
  // loader started workers too (200 launches); step 11 is irregular work
  // with no process started.
  std::vector<StepRecord> steps(14);
  for (StepRecord& s : steps) s.api.launch = 20;
  steps[0].warmup = true;
  for (size_t i : {5u, 8u, 11u}) {
    steps[i].warmup = true;
    steps[i].left_out = "extra work in the iteration (41 tokens, the steady iteration has 20)";
  }
  steps[5].api.launch = 41;
  steps[5].os.child_starts = 4;
  steps[8].api.launch = 200;
  steps[8].os.child_starts = 4;
  KeepEpochStartsMeasured(steps, /*warmup_steps=*/1);
  EXPECT_TRUE(steps[0].warmup) << "the first step stays warm-up";
  EXPECT_FALSE(steps[5].warmup);
  EXPECT_TRUE(steps[5].left_out.empty());
  EXPECT_FALSE(steps[8].left_out.empty());
  EXPECT_FALSE(steps[11].left_out.empty());
}

}  // namespace
}  // namespace gpuos
