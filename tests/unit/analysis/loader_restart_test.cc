// MoveLoaderRestarts on constructed steps that begin at backward starts
// (two backward passes a step), the loop's waits woken by its workers: a
// persistent DataLoader's restart after an evaluation moves from the
// left-out step into the next one, from the first wait for the training
// workers on; an evaluation loader's own workers, a restart no longer than
// a steady step's wait for its batch, workers that never fed a measured
// step and a next step that does not follow directly move nothing.
#include "analysis/loader_restart.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kTrainingWorker = 100;
constexpr uint32_t kEvaluationWorker = 300;
constexpr uint32_t kOtherRank = 500;  // not a worker of this loop

struct Loop {
  std::vector<StepWindow> steps;
  std::vector<uint64_t> backward;
  std::vector<LoopWait> waits;
  absl::flat_hash_set<uint32_t> workers = {kTrainingWorker, kEvaluationWorker};
  uint64_t now = 1'000 * kMs;

  // `n` steady steps: backward passes at 0 and 4 ms, a 0.5 ms wait for the
  // next batch at 8 ms, 10 ms long.
  void Steady(int n = 1) {
    for (int i = 0; i < n; ++i) SteadyStep();
  }
  void SteadyStep() {
    const uint64_t s = now;
    backward.push_back(s);
    backward.push_back(s + 4 * kMs);
    Wait(s + 8 * kMs, kMs / 2, kTrainingWorker);
    Add(s, s + 10 * kMs);
  }
  // A step with an evaluation from 5 to 15 ms (its waits woken by
  // `evaluation_waker`), then the epoch's restart: waits of `restart_ms`
  // each at 16 and 22 ms for the training workers, 30 ms long.  Marked.
  size_t Evaluation(uint32_t evaluation_waker, uint64_t restart_ms) {
    const uint64_t s = now;
    backward.push_back(s);
    backward.push_back(s + 4 * kMs);
    Wait(s + 6 * kMs, 2 * kMs, evaluation_waker);
    Wait(s + 11 * kMs, 2 * kMs, evaluation_waker);
    Wait(s + 16 * kMs, restart_ms * kMs, kTrainingWorker);
    Wait(s + 22 * kMs, restart_ms * kMs, kTrainingWorker);
    Add(s, s + 30 * kMs);
    steps.back().warmup = true;
    steps.back().left_out = "extra CPU work";
    return steps.size() - 1;
  }
  void Wait(uint64_t at, uint64_t length, uint32_t waker) { waits.push_back(LoopWait{at, at + length, waker}); }
  void Add(uint64_t start, uint64_t end) {
    StepWindow w;
    w.index = steps.size();
    w.start_ns = start;
    w.end_ns = end;
    steps.push_back(w);
    now = end;
  }
  size_t Move(const std::vector<size_t>& marked, uint64_t* wait_ns = nullptr) {
    return MoveLoaderRestarts(steps, marked, backward, waits, workers, wait_ns);
  }
};

TEST(LoaderRestartTest, ARestartAfterAnEvaluationIsMeasuredWithTheNextStepFromItsFirstWait) {
  Loop loop;
  loop.Steady(6);
  const size_t evaluation = loop.Evaluation(kOtherRank, 4);
  const uint64_t evaluation_start = loop.steps[evaluation].start_ns;
  loop.Steady(6);
  const uint64_t next_end = loop.steps[evaluation + 1].end_ns;
  uint64_t wait_ns = 0;
  ASSERT_EQ(loop.Move({evaluation}, &wait_ns), 1u);
  EXPECT_EQ(wait_ns, 8 * kMs);
  EXPECT_EQ(loop.steps[evaluation].start_ns, evaluation_start);
  EXPECT_EQ(loop.steps[evaluation].end_ns, evaluation_start + 16 * kMs) << "it ends at the restart's first wait";
  EXPECT_EQ(loop.steps[evaluation + 1].start_ns, evaluation_start + 16 * kMs);
  EXPECT_EQ(loop.steps[evaluation + 1].end_ns, next_end);
  EXPECT_TRUE(loop.steps[evaluation].warmup);
  EXPECT_NE(loop.steps[evaluation].left_out.find("DataLoader restart"), std::string::npos);
  EXPECT_TRUE(loop.steps[evaluation + 1].left_out.empty());
}

TEST(LoaderRestartTest, AnEvaluationLoadersOwnWorkersAreTheEvaluations) {
  Loop loop;
  loop.Steady(6);
  // Its own workers wake the loop only in its step: the cut is still at
  // the training workers' first wait.
  const size_t evaluation = loop.Evaluation(kEvaluationWorker, 4);
  const uint64_t evaluation_start = loop.steps[evaluation].start_ns;
  loop.Steady(6);
  ASSERT_EQ(loop.Move({evaluation}), 1u);
  EXPECT_EQ(loop.steps[evaluation].end_ns, evaluation_start + 16 * kMs);
}

TEST(LoaderRestartTest, AWaitNoLongerThanASteadyStepsForItsBatchMovesNothing) {
  Loop loop;
  loop.Steady(6);
  // 2 x 2 ms of waits: less than the steady 0.5 ms plus 5 ms.
  const size_t evaluation = loop.Evaluation(kOtherRank, 2);
  loop.Steady();
  const std::vector<StepWindow> before = loop.steps;
  EXPECT_EQ(loop.Move({evaluation}), 0u);
  EXPECT_EQ(loop.steps[evaluation].end_ns, before[evaluation].end_ns);
  EXPECT_EQ(loop.steps[evaluation].left_out, "extra CPU work");
}

TEST(LoaderRestartTest, WorkersThatFedNoMeasuredStepAreNoTrainingWorkers) {
  Loop loop;
  loop.workers = {kEvaluationWorker};  // the training loader's workers are no descendants here
  loop.Steady(6);
  const size_t evaluation = loop.Evaluation(kEvaluationWorker, 4);
  loop.Steady();
  const uint64_t end = loop.steps[evaluation].end_ns;
  EXPECT_EQ(loop.Move({evaluation}), 0u);
  EXPECT_EQ(loop.steps[evaluation].end_ns, end);
}

TEST(LoaderRestartTest, ANextStepThatDoesNotFollowDirectlyOrNoneMovesNothing) {
  Loop loop;
  loop.Steady(6);
  const size_t last = loop.Evaluation(kOtherRank, 4);
  EXPECT_EQ(loop.Move({last}), 0u) << "no next step";
  loop.now += kMs;  // a gap: the next step is another window's
  loop.Steady();
  EXPECT_EQ(loop.Move({last}), 0u);
  EXPECT_EQ(loop.steps[last].end_ns, loop.steps[last].start_ns + 30 * kMs);
}

}  // namespace
}  // namespace gpuos
