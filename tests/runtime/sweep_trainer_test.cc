// `gpuos-trace sweep` with the real tracer and the CPU LibTorch trainer
// (workloads/trainer): each value recorded in turn, the table printed,
// the knee named, a failing run reported in its column while the sweep
// goes on.  The trainer's --preprocess-us burns that much CPU per sample
// in the loader, so with --workers 0 and batch 4 a step costs about
// 4 x preprocess-us: the test sets step times in known ratios and checks
// the table and the knee against them (the numbers are re-read from the
// sweep's traces with the same comparison code).  Needs root and a trainer
// built against Debian's LibTorch; skipped otherwise.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/compare_command.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

const std::string kTrainer = GPUOS_TRAINER_BIN;

std::vector<std::string> Traces(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gpuos") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

Comparison Reread(const std::vector<std::string>& paths, const std::vector<std::string>& names, double knee) {
  std::vector<CompareInput> inputs;
  for (size_t i = 0; i < paths.size(); ++i) inputs.push_back({names[i], paths[i], std::nullopt, "", {}});
  StepOptions steps;
  steps.warmup_steps = 2;
  return CompareRuns(inputs, steps, knee);
}

rt::RunOptions LongRun() {
  rt::RunOptions options;
  options.timeout_s = 180;
  return options;
}

class SweepTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    GPUOS_REQUIRE_ROOT();
    if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  }
  rt::TempDir tmp_;
};

// Loading 4 samples at 4000, 2000 and 1900 us each: steps of about 16, 8
// and 7.6 ms, so the step halves, then improves by about 5%: below a 25%
// threshold, far from it either way, and 30 measured steps a run, so that
// a loaded machine does not move the knee.
TEST_F(SweepTrainer, KneeOnPreprocessingCost) {
  const std::string dir = tmp_.File("knee");
  rt::RunResult r = rt::Run({rt::TracerPath(), "sweep", "-o", dir, "--knee-threshold", "25%", "--warmup-steps", "2",
                             "--set", "pre=4000,2000,1900", "--", kTrainer, "--device", "cpu", "--model", "tiny",
                             "--steps", "32", "--warmup", "2", "--batch-size", "4", "--workers", "0",
                             "--preprocess-us", "{pre}"},
                            LongRun());
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* expected : {"pre=4000", "pre=2000", "pre=1900", "steps/s", "data loading %",
                               "samples/s", "Knee (threshold 25%): pre=2000", "pre=2000: mean step"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
  const std::vector<std::string> paths = Traces(dir);
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_NE(paths[0].find("01-pre=4000.gpuos"), std::string::npos) << paths[0];
  const Comparison c = Reread(paths, {"pre=4000", "pre=2000", "pre=1900"}, 0.25);
  ASSERT_EQ(c.runs.size(), 3u);
  for (const RunFacts& run : c.runs) {
    ASSERT_TRUE(run.failed.empty()) << run.failed;
    EXPECT_EQ(run.measured_steps, 30u) << run.name;
    ASSERT_TRUE(run.samples_per_s.has_value()) << run.name;  // --batch-size 4 on its command line
    EXPECT_NEAR(*run.samples_per_s, 4 * run.steps_per_s, 1e-6);
  }
  // The CPU burnt per step is a floor under the step's wall time.
  EXPECT_GE(c.runs[0].step_mean_ns, 16e6);
  EXPECT_GE(c.runs[1].step_mean_ns, 8e6);
  const double ratio = c.runs[0].step_mean_ns / c.runs[1].step_mean_ns;
  EXPECT_GT(ratio, 1.4) << r.out;
  EXPECT_LT(ratio, 2.8) << r.out;
  // The loop's time is loading in the training thread: running (data
  // loading) or, on a busy machine, waiting for a CPU meanwhile (OS
  // overhead); one of the two explains the change.
  auto loading = [](const RunFacts& run) {
    return run.stage_pct[static_cast<size_t>(Stage::kDataLoading)] +
           run.stage_pct[static_cast<size_t>(Stage::kOsOverhead)];
  };
  EXPECT_GT(loading(c.runs[0]), 90.0);
  ASSERT_EQ(c.deltas.size(), 2u);
  ASSERT_TRUE(c.deltas[0].explaining_stage.has_value());
  EXPECT_TRUE(*c.deltas[0].explaining_stage == Stage::kDataLoading ||
              *c.deltas[0].explaining_stage == Stage::kOsOverhead)
      << c.deltas[0].line;
  ASSERT_TRUE(c.knee && c.knee->found) << r.out;
  EXPECT_EQ(c.knee->at, "pre=2000");
}

// Two worker processes halve the loading (2 x 4 x 2000 us of CPU per two
// steps on two cores); an impossible --workers fails that run only, and
// the runs after it still run.
TEST_F(SweepTrainer, WorkersAndAFailingRun) {
  const std::string dir = tmp_.File("workers");
  rt::RunResult r = rt::Run({rt::TracerPath(), "sweep", "-o", dir, "--warmup-steps", "2", "--set",
                             "workers=0,9999,2", "--", kTrainer, "--device", "cpu", "--model", "tiny", "--steps",
                             "12", "--warmup", "2", "--batch-size", "4", "--workers", "{workers}",
                             "--preprocess-us", "2000"},
                            LongRun());
  EXPECT_EQ(r.exit_code, 1) << r.Describe();  // a run failed; the table is still printed
  for (const char* expected : {"workers=0", "workers=2", "workers=9999", "failed: exit", "switches/step workers"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
  // The failing run is the middle one: the sweep goes on after it.
  EXPECT_NE(r.err.find("sweep run 2/3 workers=9999: failed: exit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sweep run 3/3 workers=2: done"), std::string::npos) << r.err;
  const Comparison c = Reread({dir + "/01-workers=0.gpuos", dir + "/03-workers=2.gpuos"}, {"workers=0", "workers=2"},
                              0.05);
  ASSERT_TRUE(c.runs[0].failed.empty() && c.runs[1].failed.empty());
  EXPECT_EQ(c.runs[0].os.workers.switches, 0.0);
  EXPECT_GT(c.runs[1].os.workers.switches, 0.0);
  // Without workers the loop loads (runs, or waits for a CPU meanwhile);
  // with them it waits in futex for the workers' batches.  Whether two
  // workers make the step shorter depends on free cores, which a shared
  // CI machine does not promise: the knee test above controls step times.
  auto idle = [](const RunFacts& run, IdleCause cause) { return run.gpu_idle_pct[static_cast<size_t>(cause)]; };
  EXPECT_GT(idle(c.runs[0], IdleCause::kDataWaitRunning) + idle(c.runs[0], IdleCause::kPreemptedRunqueue), 90.0);
  EXPECT_LT(idle(c.runs[0], IdleCause::kDataWaitFutex), 5.0);
  EXPECT_GT(idle(c.runs[1], IdleCause::kDataWaitFutex), 50.0);
  ASSERT_EQ(c.deltas.size(), 1u);
  EXPECT_EQ(c.deltas[0].baseline, "workers=0");
}

TEST_F(SweepTrainer, BadSpecificationRunsNothing) {
  const std::string dir = tmp_.File("bad");
  rt::RunResult r = rt::Run({rt::TracerPath(), "sweep", "-o", dir, "--set", "workers=0,2", "--", kTrainer,
                             "--workers", "{worker}"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  ASSERT_EQ(r.ErrLines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("{worker}"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace gpuos
