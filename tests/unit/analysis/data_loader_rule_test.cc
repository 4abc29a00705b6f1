// The data_loader_starvation rule's advice by what held the pipeline back
// (data_pipeline_bound.h), on simulated loops whose two data workers, while
// the loop waits for their batches, preprocess on a CPU, read from disk, or
// wait for a CPU: more workers, storage, fewer threads.
#include <string>

#include "analysis/data_pipeline_bound.h"
#include "analysis/diagnosis.h"
#include "gtest/gtest.h"
#include "support/diagnosis_sim.h"

namespace gpuos {
namespace {

using namespace diagnosis_sim;
using WorkerDoes = Sim::WorkerDoes;

// 20 steps: a 6 ms wait for a worker's batch, then 10 kernels of 400 us.
StepAnalysis Loop(WorkerDoes does) {
  Sim sim(/*worker_processes=*/2, /*online_cpus=*/16);
  for (int i = 0; i < 20; ++i) {
    sim.BeginStep();
    sim.GetBatchFrom(i % 2, 6 * kMs, does);
    for (int k = 0; k < 10; ++k) sim.Launch(400 * kUs, kCompute, 20 * kUs);
    sim.Sync();
    sim.EndStep();
  }
  return sim.Analyze();
}

Finding DataLoaderFinding(const Diagnosis& d) {
  const Finding* f = FindingOf(d, Bottleneck::kDataLoader);
  EXPECT_NE(f, nullptr) << Describe(d);
  return f ? *f : Finding();
}

TEST(DataLoaderRuleTest, WorkersPreprocessingOnTheCpuWantMoreWorkers) {
  const StepAnalysis a = Loop(WorkerDoes::kPreprocessing);
  EXPECT_EQ(FindDataPipelineBound(a).Limit(), DataPipelineLimit::kCpu);
  const Finding f = DataLoaderFinding(Diagnose(a));
  EXPECT_NE(f.evidence.find("the data loading (its own, and that of the threads it waited on"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find("on a CPU 100.0%"), std::string::npos) << f.evidence;
  EXPECT_NE(f.recommendation.find("Add DataLoader workers (more than the 2 now"), std::string::npos)
      << f.recommendation;
}

TEST(DataLoaderRuleTest, WorkersReadingFromDiskAreStorageBound) {
  const StepAnalysis a = Loop(WorkerDoes::kReadingDisk);
  const DataPipelineBound b = FindDataPipelineBound(a);
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kDisk);
  EXPECT_GT(b.Share(b.disk_ns), 0.95);
  const Finding f = DataLoaderFinding(Diagnose(a));
  EXPECT_NE(f.evidence.find("waiting for disk 99"), std::string::npos) << f.evidence;
  EXPECT_NE(f.recommendation.find("Storage sets the pace"), std::string::npos) << f.recommendation;
  // 4 MiB a step, read by the workers.
  EXPECT_NE(f.recommendation.find("(4.0 MiB of block I/O a step"), std::string::npos) << f.recommendation;
  EXPECT_EQ(f.recommendation.find("Add DataLoader workers"), std::string::npos) << f.recommendation;
}

TEST(DataLoaderRuleTest, WorkersWaitingForACpuAreOversubscribed) {
  const StepAnalysis a = Loop(WorkerDoes::kWaitingForCpu);
  EXPECT_EQ(FindDataPipelineBound(a).Limit(), DataPipelineLimit::kCpuWait);
  const Finding f = DataLoaderFinding(Diagnose(a));
  EXPECT_NE(f.evidence.find("waiting for a CPU (run queue, preempted) 99"), std::string::npos) << f.evidence;
  EXPECT_NE(f.recommendation.find("oversubscribed"), std::string::npos) << f.recommendation;
  EXPECT_NE(f.recommendation.find("More workers will not help"), std::string::npos) << f.recommendation;
}

// 40 steps: three in four find a batch ready, the fourth waits 12 ms for a
// worker's; then 10 kernels of 400 us, or 4 ms on the CPU.
StepAnalysis Bursts(bool on_gpu) {
  Sim sim(/*worker_processes=*/4, /*online_cpus=*/16);
  for (int i = 0; i < 40; ++i) {
    sim.BeginStep();
    if (i % 4 == 3) {
      sim.GetBatchFrom(i % 4, 12 * kMs, WorkerDoes::kPreprocessing);
    } else {
      sim.GetBatch(0, 100 * kUs);
    }
    if (on_gpu) {
      for (int k = 0; k < 10; ++k) sim.Launch(400 * kUs, kCompute, 20 * kUs);
      sim.Sync();
    } else {
      sim.Cpu(4 * kMs);
    }
    sim.EndStep();
  }
  return sim.Analyze();
}

TEST(DataLoaderRuleTest, ALoaderTooSlowThatDeliversInBurstsIsOneFinding) {
  // Four workers prefetch: three steps in four find a batch ready, the
  // fourth waits 12 ms for the next.  The loader is slow on average, not
  // now and then: no intermittent-stalls finding beside it.
  const Diagnosis d = Diagnose(Bursts(/*on_gpu=*/true));
  const Finding f = DataLoaderFinding(d);
  EXPECT_TRUE(d.stalls.found()) << "the stalled steps are still found";
  EXPECT_FALSE(HasFinding(d, Bottleneck::kIntermittentStalls)) << Describe(d);
  EXPECT_NE(f.evidence.find("The waits come in bursts: 10 of 39 measured steps"), std::string::npos) << f.evidence;
  EXPECT_LT(f.evidence.find("come in bursts"), f.evidence.find("Expected gain"));
}

TEST(DataLoaderRuleTest, OnTheCpuTooABurstyLoaderIsOneFinding) {
  // The same bursts in a job that runs on the CPU (no GPU records).
  const Diagnosis d = Diagnose(Bursts(/*on_gpu=*/false));
  ASSERT_EQ(d.primary.bottleneck, Bottleneck::kNoGpuActivity) << Describe(d);
  EXPECT_TRUE(d.stalls.found());
  EXPECT_FALSE(HasFinding(d, Bottleneck::kIntermittentStalls)) << Describe(d);
  EXPECT_NE(DataLoaderFinding(d).evidence.find("The waits come in bursts"), std::string::npos) << Describe(d);
}

TEST(DataLoaderRuleTest, WorkersStartedAgainReadingTheirLibrariesAreNotTheStorage) {
  // Every 10th step starts the workers again (spawn), and the loop waits
  // 150 ms while a new worker reads its libraries from disk; the other
  // steps wait 10 ms for a worker preprocessing on a CPU.  The restarts are
  // their own finding: the pipeline's steady state is CPU-bound.
  Sim sim(/*worker_processes=*/2, /*online_cpus=*/16);
  for (int i = 0; i < 40; ++i) {
    sim.BeginStep();
    if (i % 10 == 0 && i > 0) {
      sim.StartWorkers(2, /*exec=*/true, 50 * kMs);
      sim.GetBatchFrom(0, 150 * kMs, WorkerDoes::kReadingDisk);
    } else {
      sim.GetBatchFrom(i % 2, 10 * kMs, WorkerDoes::kPreprocessing);
    }
    for (int k = 0; k < 5; ++k) sim.Launch(400 * kUs, kCompute, 20 * kUs);
    sim.Sync();
    sim.EndStep();
  }
  const StepAnalysis a = sim.Analyze();
  EXPECT_EQ(FindDataPipelineBound(a).Limit(), DataPipelineLimit::kDisk) << "over every step, the restarts' reads";
  EXPECT_EQ(FindDataPipelineBound(a, /*without_restart_steps=*/true).Limit(), DataPipelineLimit::kCpu);
  const Diagnosis d = Diagnose(a);
  ASSERT_TRUE(HasFinding(d, Bottleneck::kWorkerRestarts)) << Describe(d);
  const Finding f = DataLoaderFinding(d);
  EXPECT_NE(f.recommendation.find("Add DataLoader workers"), std::string::npos) << f.recommendation;
  EXPECT_EQ(f.recommendation.find("Storage"), std::string::npos) << f.recommendation;
}

TEST(DataLoaderRuleTest, TooLittleOfTheWaitExplainedIsNoLimit) {
  DataPipelineBound b;
  b.data_idle_ns = 100;
  b.disk_ns = 20;  // 20% of the wait explained, all of it disk
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kUnknown);
  b.disk_ns = 30;
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kDisk);
  b.cpu_ns = 25;  // disk 30 of 55: 55%
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kDisk);
  b.cpu_ns = 30;
  b.cpu_wait_ns = 30;  // disk 30 of 90: no part at 40%
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kUnknown);
}

}  // namespace
}  // namespace gpuos
