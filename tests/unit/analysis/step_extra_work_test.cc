// MarkExtraWorkSteps on constructed steps and GPU work: an evaluation pass
// (more work) and a checkpoint (kinds of work steady steps lack) are left
// out with the reason; a data stall (slower, same work), an occasional
// loss.item() and a warm-up step keep what they had; work that varies
// from step to step (dynamic shapes, sentences of varied length) marks
// nothing, unless a step's extra stands apart of it.  SplitExtraWorkSteps
// cuts the iteration that ends such a step off its extra work, where that
// work's last GPU operation ends, and only where a data fetch follows.  MarkExtraCpuWorkSteps
// on the CPU work of constructed steps: evaluation passes (a stretch
// between two marks running far longer, no backward pass in it) are left
// out, jitter, a garbage collection and a merged step (more backward
// passes) are not, nor anything in a loop whose work varies.
// A step whose loop thread forked a process is a new epoch's DataLoader
// workers starting, unless its extra is larger than an epoch start's: the
// fork's own CPU time where no data-loader range holds it (no Python hook),
// and the copy-on-write page faults that follow it.
// SplitExtraCpuWorkSteps cuts the iteration off such a step where its data
// loading begins (a new epoch's iterator chained to its first fetch).
#include "analysis/epoch_end_split.h"
#include "analysis/step_extra_work.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kMs = 1'000'000;

struct Trace {
  std::vector<StepWindow> steps;
  std::vector<SequenceToken> tokens;
  uint64_t now = 1'000 * kMs;
  // One step: `symbols` 10 us apart, after `stall`.
  void Step(const std::vector<uint32_t>& symbols, uint64_t stall = 0) {
    StepWindow w;
    w.index = steps.size();
    w.start_ns = now;
    now += stall;
    for (uint32_t s : symbols) {
      tokens.push_back(SequenceToken{s, now, now + 5'000});
      now += 10'000;
    }
    now += kMs;
    w.end_ns = now;
    steps.push_back(w);
  }
};

std::vector<uint32_t> Work(uint32_t from, uint32_t to, std::vector<uint32_t> v = {}) {
  for (uint32_t s = from; s < to; ++s) v.push_back(s);
  return v;
}

TEST(StepExtraWorkTest, EvaluationAndCheckpointAreLeftOutStallsAndItemsAreNot) {
  Trace t;
  for (int i = 0; i < 20; ++i) {
    std::vector<uint32_t> w = Work(0, 100);
    if (i == 3 || i == 13) w = Work(400, 402, w);  // loss.item(): a copy and a sync
    if (i == 10) w = Work(200, 400, w);            // evaluation: 200 forward-only kernels
    if (i == 15) w = Work(500, 520, w);            // checkpoint: 20 copies to the host
    t.Step(w, i == 7 ? 50 * kMs : 0);              // 7: a data stall
  }
  t.steps[0].warmup = true;
  EXPECT_EQ(MarkExtraWorkSteps(t.steps, t.tokens), 2u);
  for (const StepWindow& w : t.steps) {
    const bool extra = w.index == 10 || w.index == 15;
    EXPECT_EQ(!w.left_out.empty(), extra) << "step " << w.index << ": " << w.left_out;
    EXPECT_EQ(w.warmup, extra || w.index == 0) << "step " << w.index;
  }
  EXPECT_NE(t.steps[10].left_out.find("300 GPU operations, the median step has 100"), std::string::npos)
      << t.steps[10].left_out;
  EXPECT_NE(t.steps[10].left_out.find("evaluation pass or checkpoint"), std::string::npos);
}

TEST(StepExtraWorkTest, TooFewStepsOrNoGpuWorkMarkNothing) {
  Trace few;
  for (int i = 0; i < 4; ++i) few.Step(i == 2 ? Work(0, 300) : Work(0, 100));
  EXPECT_EQ(MarkExtraWorkSteps(few.steps, few.tokens), 0u);
  Trace cpu_only;
  for (int i = 0; i < 10; ++i) cpu_only.Step({});
  cpu_only.tokens.push_back(SequenceToken{0, cpu_only.steps[4].start_ns, cpu_only.steps[4].start_ns + 1});
  EXPECT_EQ(MarkExtraWorkSteps(cpu_only.steps, cpu_only.tokens), 0u);
}

TEST(StepExtraWorkTest, WorkThatVariesFromStepToStepMarksNothing) {
  // Dynamic shapes: each step picks one of 3 sets of 20 GEMM kernels.
  Trace t;
  for (uint32_t i = 0; i < 30; ++i) t.Step(Work(1000 + 20 * (i % 3), 1020 + 20 * (i % 3), Work(0, 100)));
  EXPECT_EQ(MarkExtraWorkSteps(t.steps, t.tokens), 0u);
  for (const StepWindow& w : t.steps) EXPECT_TRUE(w.left_out.empty()) << w.left_out;
}

TEST(StepExtraWorkTest, WorkThatGrowsWithEachSentencesLengthMarksOnlyWhatStandsApart) {
  // A seq2seq loop run token by token: 40 operations a token, 3 to 12
  // tokens, so one step has up to 2x the median's work, and half the steps
  // (no teacher forcing) hold a top-k and a copy a token that the others
  // lack.  Then, once, an evaluation pass of 2,000 more operations.
  for (const bool evaluation : {false, true}) {
    Trace t;
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
      const uint32_t tokens = 3 + rng() % 10;
      std::vector<uint32_t> w;
      for (uint32_t k = 0; k < tokens; ++k) w = Work(0, 40, w);
      if (rng() % 2 == 0) {
        for (uint32_t k = 0; k < tokens; ++k) w = Work(600, 602, w);
      }
      if (evaluation && i == 120) w = Work(1000, 3000, w);
      t.Step(w);
    }
    EXPECT_EQ(MarkExtraWorkSteps(t.steps, t.tokens), evaluation ? 1u : 0u);
    for (const StepWindow& w : t.steps) {
      EXPECT_EQ(!w.left_out.empty(), evaluation && w.index == 120) << "step " << w.index << ": " << w.left_out;
    }
  }
}

// Steps from optimizer.step marks: each a data fetch,// Steps from optimizer.step marks: each a data fetch, a forward pass (0-49),
// a backward pass (50-99) and the update; `extra` (before the fetch)
// inserts an evaluation's or checkpoint's work first.
struct MarkedLoop {
  Trace t;
  std::vector<uint64_t> fetches, backward;
  void Step(const std::vector<uint32_t>& extra = {}, bool fetch = true, uint64_t epoch_start_wait = 0) {
    StepWindow w;
    w.index = t.steps.size();
    w.start_ns = t.now;
    for (uint32_t s : extra) {
      t.tokens.push_back(SequenceToken{s, t.now, t.now + 5'000});
      t.now += 10'000;
    }
    t.now += kMs;
    if (fetch) fetches.push_back(t.now);
    t.now += kMs + epoch_start_wait;
    for (uint32_t s = 0; s < 100; ++s) {
      if (s == 50) backward.push_back(t.now);
      t.tokens.push_back(SequenceToken{s, t.now, t.now + 5'000});
      t.now += 10'000;
    }
    w.end_ns = t.now;
    t.steps.push_back(w);
  }
};

TEST(StepExtraWorkTest, TheIterationAfterAnEvaluationIsCutOffAndMeasured) {
  // Steps 10 and 20 begin with an evaluation (60 forward-only kernels,
  // 200-259) and a checkpoint's copies (300-309); step 20's iteration also
  // waits 40 ms for its first batch (an epoch's start: the DataLoader's
  // workers started again), which the job's own timing counts.
  MarkedLoop loop;
  for (int i = 0; i < 30; ++i) {
    loop.Step(i == 10 || i == 20 ? Work(200, 260, Work(300, 310)) : std::vector<uint32_t>{}, true,
              i == 20 ? 40 * kMs : 0);
  }
  std::vector<size_t> marked;
  ASSERT_EQ(MarkExtraWorkSteps(loop.t.steps, loop.t.tokens, &marked), 2u);
  const uint64_t epoch_iteration_end = loop.t.steps[20].end_ns;
  EXPECT_EQ(SplitExtraWorkSteps(loop.t.steps, loop.t.tokens, marked, loop.fetches, loop.backward), 2u);
  ASSERT_EQ(loop.t.steps.size(), 32u);
  for (size_t k = 0; k < loop.t.steps.size(); ++k) {
    const StepWindow& w = loop.t.steps[k];
    EXPECT_EQ(w.index, k);
    if (k > 0) EXPECT_EQ(w.start_ns, loop.t.steps[k - 1].end_ns) << "contiguous";
    const bool extra = k == 10 || k == 21;
    EXPECT_EQ(!w.left_out.empty(), extra) << "step " << k << ": " << w.left_out;
    EXPECT_EQ(w.warmup, extra) << "step " << k;
  }
  EXPECT_NE(loop.t.steps[21].left_out.find("measured on its own"), std::string::npos) << loop.t.steps[21].left_out;
  // The epoch's first iteration: from the end of the checkpoint's last copy
  // (1 ms and 5 us before the fetch), its 40 ms wait included.
  EXPECT_EQ(loop.t.steps[22].start_ns, loop.fetches[20] - kMs - 5'000);
  EXPECT_EQ(loop.t.steps[22].end_ns, epoch_iteration_end);
  EXPECT_GT(loop.t.steps[22].end_ns - loop.t.steps[22].start_ns, 40 * kMs);
}

TEST(StepExtraWorkTest, AStepIsNotCutWithoutAFetchAfterTheExtraOrAWholeIteration) {
  MarkedLoop loop;
  for (int i = 0; i < 30; ++i) {
    // 10: no data fetch marked (a loop over tensors on the device); 20: the
    // extra comes after the backward pass, where no iteration follows it.
    loop.Step(i == 10 ? Work(200, 260) : std::vector<uint32_t>{}, i != 10);
    if (i == 20) {
      for (uint32_t s = 200; s < 260; ++s) {
        loop.t.tokens.push_back(SequenceToken{s, loop.t.now, loop.t.now + 5'000});
        loop.t.now += 10'000;
      }
      loop.t.steps.back().end_ns = loop.t.now;
    }
  }
  std::vector<size_t> marked;
  ASSERT_EQ(MarkExtraWorkSteps(loop.t.steps, loop.t.tokens, &marked), 2u);
  EXPECT_EQ(SplitExtraWorkSteps(loop.t.steps, loop.t.tokens, marked, loop.fetches, loop.backward), 0u);
  EXPECT_EQ(loop.t.steps.size(), 30u);
  EXPECT_FALSE(loop.t.steps[10].left_out.empty());
  EXPECT_FALSE(loop.t.steps[20].left_out.empty());
}

// `n` steps of `k` stretches (a step cut at its backward passes), each
// stretch about 7 ms of CPU work (+-`jitter`), the last 2 ms more (the
// update).
std::vector<StepCpuWork> CpuSteps(size_t n, size_t k, double jitter, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(1 - jitter, 1 + jitter);
  std::vector<StepCpuWork> work(n);
  for (StepCpuWork& w : work) {
    for (size_t q = 0; q < k; ++q) w.stretches_ns.push_back(static_cast<uint64_t>((q + 1 == k ? 9 : 7) * kMs * noise(rng)));
  }
  return work;
}

std::vector<StepWindow> Windows(size_t n) {
  std::vector<StepWindow> steps(n);
  for (size_t i = 0; i < n; ++i) {
    steps[i].index = i;
    steps[i].start_ns = (i + 1) * 100 * kMs;
    steps[i].end_ns = (i + 2) * 100 * kMs;
  }
  return steps;
}

TEST(StepExtraWorkTest, CpuEvaluationPassesAreLeftOutJitterAndAGcPauseAreNot) {
  for (size_t k : {1u, 3u, 4u}) {
    std::vector<StepCpuWork> work = CpuSteps(40, k, 0.15, static_cast<uint32_t>(k));
    // An evaluation pass after every 10th optimizer step: 25 ms of forward
    // work in the stretch after the last backward pass.
    for (size_t i = 9; i < 40; i += 10) work[i].stretches_ns.back() += 25 * kMs;
    // A garbage collection: 6 ms in one stretch.
    work[4].stretches_ns[0] += 6 * kMs;
    // The warm-up step's first-time work dwarfs them (it is left out
    // already and sets nothing).
    work[0].stretches_ns[0] += 300 * kMs;
    std::vector<StepWindow> steps = Windows(40);
    steps[0].warmup = true;
    EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 4u) << k;
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool eval = i % 10 == 9;
      EXPECT_EQ(!steps[i].left_out.empty(), eval) << k << " " << i << ": " << steps[i].left_out;
      EXPECT_EQ(steps[i].warmup, eval || i == 0) << i;
    }
    EXPECT_NE(steps[9].left_out.find("extra CPU work"), std::string::npos) << steps[9].left_out;
    EXPECT_NE(steps[9].left_out.find("no backward pass"), std::string::npos) << steps[9].left_out;
  }
}

TEST(StepExtraWorkTest, ASmallerExtraIsLeftOutWhenItStandsApartOfTheNoise) {
  // A single-stretch step of 24 ms (word_lm-like), an epoch-end evaluation
  // of 20 ms: less than a step, but 3/4 of one and far above the jitter.
  std::vector<StepCpuWork> work(30);
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (StepCpuWork& w : work) w.stretches_ns = {static_cast<uint64_t>(24 * kMs * noise(rng))};
  work[25].stretches_ns[0] += 20 * kMs;
  std::vector<StepWindow> steps = Windows(30);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 1u);
  EXPECT_FALSE(steps[25].left_out.empty());
}

TEST(StepExtraWorkTest, AnEpochsWorkerForksWithoutTheHookAreDataLoadingButAnEvaluationIsNot) {
  // 12 ms steps, no Python hook: a new epoch's iterator forks its worker
  // and takes 17 ms more every 20 steps (hogwild on the VM: every 64); a step with
  // the same 17 ms more and no fork is extra work as before.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  auto steady = [&]() {
    std::vector<StepCpuWork> work(60);
    for (StepCpuWork& w : work) w.stretches_ns = {static_cast<uint64_t>(12 * kMs * noise(rng))};
    return work;
  };
  std::vector<StepCpuWork> work = steady();
  for (size_t i : {20u, 40u}) {
    work[i].stretches_ns[0] += 17 * kMs;
    work[i].forked = work[i].fork_in_stretches = true;
  }
  work[30].stretches_ns[0] += 17 * kMs;
  std::vector<StepWindow> steps = Windows(60);
  std::vector<size_t> marked;
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 1u);
  EXPECT_EQ(marked, (std::vector<size_t>{30}));
  for (size_t i : {20u, 40u}) EXPECT_TRUE(steps[i].left_out.empty()) << i << ": " << steps[i].left_out;
  // Where nothing says a fork is a loader's, the same steps are extra work;
  // so are they where the fork's own time is in a data-loader range (the
  // Python hook's) and no page faults followed it.
  for (StepCpuWork& w : work) w.forked = w.fork_in_stretches = false;
  steps = Windows(60);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 3u);
  for (size_t i : {20u, 40u}) work[i].forked = true;
  steps = Windows(60);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 3u);

  // An evaluation whose own loader forks workers takes 60 ms more: more
  // than kEpochStartMaxExtraSteps steps, so it is left out all the same.
  work = steady();
  for (size_t i : {20u, 30u, 40u}) {
    work[i].stretches_ns[0] += (i == 30 ? 60 : 17) * kMs;
    work[i].forked = work[i].fork_in_stretches = true;
  }
  steps = Windows(60);
  marked.clear();
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 1u);
  EXPECT_EQ(marked, (std::vector<size_t>{30}));
}

TEST(StepExtraWorkTest, TheCopyOnWriteFaultsAfterAnEpochsWorkerForksAreDataLoadingToo) {
  // Hogwild on a VM whose hypervisor shadows the page tables: 15 ms steps
  // with 7 page faults each; every 64 steps a new epoch's iterator forks
  // its worker, and the loop's thread then takes about 3,100 copy-on-write
  // faults over that step and the next, 185 to 205 ms more than two steps,
  // with the Python hook (the fork's own time in a data-loader range) or
  // without it.  An evaluation pass of 250 ms with no fork, and one whose
  // own loader forks but that runs 450 ms more, are extra work.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (const bool hook : {true, false}) {
    std::vector<StepCpuWork> work(200);
    for (StepCpuWork& w : work) {
      w.stretches_ns = {static_cast<uint64_t>(15 * kMs * noise(rng))};
      w.page_faults = 7;
    }
    for (size_t i : {64u, 128u}) {
      work[i].stretches_ns[0] += (hook ? 150 : 170) * kMs;
      work[i].forked = true;
      work[i].fork_in_stretches = !hook;
      work[i].page_faults = 2'700;
      // The faults run on into the next iteration.
      work[i + 1].stretches_ns[0] += 35 * kMs;
      work[i + 1].page_faults = 400;
    }
    work[100].stretches_ns[0] += 250 * kMs;
    work[160].stretches_ns[0] += 450 * kMs;
    work[160].forked = true;
    work[160].fork_in_stretches = !hook;
    work[160].page_faults = 2'700;
    std::vector<StepWindow> steps = Windows(200);
    std::vector<size_t> marked;
    EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 2u) << hook;
    EXPECT_EQ(marked, (std::vector<size_t>{100, 160})) << hook;
    // Without the faults, the fork alone does not explain 150 ms (the steps
    // after, 35 ms more, fall below the break).
    for (size_t i : {64u, 65u, 128u, 129u}) work[i].page_faults = 7;
    steps = Windows(200);
    marked.clear();
    EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 4u) << hook;
    EXPECT_EQ(marked, (std::vector<size_t>{64, 100, 128, 160})) << hook;
  }
}

TEST(StepExtraWorkTest, AnEvaluationThatAdaptsIsToldByItsAutogradCallsOnANoisyMachine) {
  // MAML with the Python hook: one loss.backward() an iteration cuts two
  // stretches, and 4 torch.autograd.grad calls adapt to the tasks; every
  // 20th step also holds an evaluation that adapts with 40 more calls and
  // runs 55-65 ms more than a 40 ms step.  The machine is noisy: 30-58 ms
  // for the same work, one step 36 ms more, so no break in the CPU time
  // sets the evaluations apart.  Their engine calls do.
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> noise(0.75, 1.45);
  std::vector<StepCpuWork> work(80);
  for (StepCpuWork& w : work) {
    w.stretches_ns = {static_cast<uint64_t>(36 * kMs * noise(rng)), static_cast<uint64_t>(4 * kMs * noise(rng))};
    w.other_engine_calls = 4;
  }
  for (size_t i : {19u, 39u, 59u}) {
    work[i].stretches_ns[0] += (50 + i / 4) * kMs;
    work[i].other_engine_calls = 44;
  }
  work[47].stretches_ns[0] += 36 * kMs;
  std::vector<StepWindow> steps = Windows(80);
  std::vector<size_t> marked;
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 3u);
  EXPECT_EQ(marked, (std::vector<size_t>{19, 39, 59}));
  EXPECT_NE(steps[19].left_out.find("44 calls of the autograd engine"), std::string::npos) << steps[19].left_out;

  // A gradient penalty's one call every step, and a few steps with 3 more
  // (under 2m + 8), are training work.
  for (StepCpuWork& w : work) w.other_engine_calls = 1;
  for (size_t i : {19u, 39u, 59u}) work[i].other_engine_calls = 4;
  steps = Windows(80);
  marked.clear();
  MarkExtraCpuWorkSteps(steps, work, &marked);
  for (size_t k : marked) EXPECT_EQ(steps[k].left_out.find("autograd engine"), std::string::npos) << k;
}

TEST(StepExtraWorkTest, SpikesOfAFewMsInTinyStepsAreNotEvaluations) {
  // A plain epoch loop of 1.2 ms steps on a loaded VM: two steps ran 1.6
  // and 1.9 ms more (time the hypervisor took, counted as running).  An
  // evaluation pass of 6 ms more stands apart.
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  std::vector<StepCpuWork> work(79);
  for (StepCpuWork& w : work) w.stretches_ns = {static_cast<uint64_t>(1.2 * static_cast<double>(kMs) * noise(rng))};
  work[14].stretches_ns[0] += 1'900'000;
  work[23].stretches_ns[0] += 1'600'000;
  std::vector<StepWindow> steps = Windows(79);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
  work[40].stretches_ns[0] += 6 * kMs;
  steps = Windows(79);
  std::vector<size_t> marked;
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 1u);
  EXPECT_EQ(marked, (std::vector<size_t>{40}));
}

TEST(StepExtraWorkTest, AFewSpikesInALongRunStayIn) {
  // 500 steps of 4 ms, four spikes of 4 to 7 ms (a busy machine): they
  // stand apart, but make under 1% of the run's CPU work.
  std::vector<StepCpuWork> work(500);
  std::mt19937 rng(6);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (StepCpuWork& w : work) w.stretches_ns = {static_cast<uint64_t>(4 * kMs * noise(rng))};
  for (size_t i : {100u, 150u, 300u, 420u}) work[i].stretches_ns[0] += (4 + i % 4) * kMs;
  std::vector<StepWindow> steps = Windows(500);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
  // The same spikes in a short run are 4% of it: left out.
  work.resize(100);
  work[60].stretches_ns[0] += 6 * kMs;
  work[80].stretches_ns[0] += 5 * kMs;
  steps = Windows(100);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 2u);
}

TEST(StepExtraWorkTest, EvaluationPassesStandApartWhileTheMachineSpeedDrifts) {
  // A shared VM's speed drifts: the steady step's CPU time grows by half
  // over the run, gradually or at once, so a late steady step is longer
  // than an early evaluation pass's extra
  // (grad_accum_eval on CI: steps of 30 to 46 ms, evaluations of 33 to
  // 56 ms).  Each step is judged against its neighbours.
  // change: 0 gradual, else the first slower step (20: right after an
  // evaluation).
  for (size_t change : {0u, 15u, 20u}) {
    std::vector<StepCpuWork> work = CpuSteps(40, 3, 0.08, 11);
    for (size_t i = 0; i < work.size(); ++i) {
      const double speed = change ? (i < change ? 1.0 : 1.55) : 1.0 + 0.55 * static_cast<double>(i) / 39;
      for (uint64_t& ns : work[i].stretches_ns) ns = static_cast<uint64_t>(static_cast<double>(ns) * speed);
      // An evaluation pass after every 10th step: 1.1 steps' work.
      if (i % 10 == 9) work[i].stretches_ns.back() += static_cast<uint64_t>(1.1 * 23 * kMs * speed);
    }
    std::vector<StepWindow> steps = Windows(40);
    steps[0].warmup = true;
    EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 4u) << change;
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_EQ(!steps[i].left_out.empty(), i % 10 == 9) << change << " " << i << ": " << steps[i].left_out;
    }
  }
  // The drift alone, with no evaluation pass, marks nothing.
  std::vector<StepCpuWork> work = CpuSteps(40, 3, 0.08, 12);
  for (size_t i = 0; i < work.size(); ++i) {
    for (uint64_t& ns : work[i].stretches_ns) ns = static_cast<uint64_t>(static_cast<double>(ns) * (i < 20 ? 1.0 : 1.8));
  }
  std::vector<StepWindow> steps = Windows(40);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
}

TEST(StepExtraWorkTest, AnEvaluationsOwnLoaderMarksItsStepAmongStepsThatVary) {
  // Multi-scale batches: each step's 4 stretches vary from 0.25x to 2.25x
  // of 7 ms, so no extra stands apart of the others; every 10th step holds
  // a validation whose loader's workers ended before the next backward
  // pass, 12 ms more than its neighbours.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> scale(0.25, 2.25);
  std::vector<StepCpuWork> work(50);
  for (StepCpuWork& w : work) {
    for (int q = 0; q < 4; ++q) w.stretches_ns.push_back(static_cast<uint64_t>(7 * kMs * scale(rng)));
  }
  for (size_t i = 9; i < 50; i += 10) {
    work[i].stretches_ns.back() += 12 * kMs;
    work[i].evaluation_loader = true;
  }
  std::vector<StepWindow> steps = Windows(50);
  std::vector<size_t> marked;
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work, &marked), 5u);
  EXPECT_EQ(marked, (std::vector<size_t>{9, 19, 29, 39, 49}));
  EXPECT_NE(steps[19].left_out.find("an evaluation's DataLoader"), std::string::npos) << steps[19].left_out;
  // Without the loader's workers nothing tells them from the batches' spread.
  for (StepCpuWork& w : work) w.evaluation_loader = false;
  steps = Windows(50);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
  // A loader started and ended in every step (`next(iter(DataLoader(...)))`
  // each iteration) tells nothing either.
  for (StepCpuWork& w : work) w.evaluation_loader = true;
  steps = Windows(50);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
}

TEST(StepExtraWorkTest, NoCpuExtraWhenNothingStandsApart) {
  // Extras that form a continuum (variable-length batches: 0.5x to 3x the
  // work) mark nothing, however large the largest: 5 to 44 ms around 24.
  std::vector<StepCpuWork> work(50);
  for (size_t i = 0; i < work.size(); ++i) work[i].stretches_ns = {(5 + (i * 7) % 40) * kMs};
  std::vector<StepWindow> steps = Windows(50);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, work), 0u);
  // A step with more backward passes (a missed mark merged two) is not
  // extra work, however long.
  std::vector<StepCpuWork> merged = CpuSteps(30, 2, 0.05, 8);
  merged[12].stretches_ns = {7 * kMs, 7 * kMs, 7 * kMs, 9 * kMs};
  steps = Windows(30);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, merged), 0u);
  // Too few steps, or no CPU work known.
  steps = Windows(4);
  std::vector<StepCpuWork> four = CpuSteps(4, 1, 0, 1);
  four[2].stretches_ns[0] *= 5;
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, four), 0u);
  steps = Windows(10);
  EXPECT_EQ(MarkExtraCpuWorkSteps(steps, {}), 0u);
}

// A CPU loop's timeline between optimizer.step marks: each iteration
// fetches its batch (a data range), runs forward, backward, and updates;
// some steps begin with an evaluation (a validation loader's iterator and
// fetches, each batch's forward after it) and an epoch's start (the
// training loader's iterator made again, 3 ms, right before its first
// fetch).  The loop's thread runs all the time; its CPU time outside data
// ranges is what the split weighs.
struct CpuLoop {
  std::vector<StepWindow> steps;
  std::vector<std::pair<uint64_t, uint64_t>> data;
  std::vector<uint64_t> backward;
  std::vector<uint64_t> iterations;  // where each step's training iteration begins
  uint64_t now = 1'000 * kMs;
  void Range(uint64_t len) {
    data.emplace_back(now, now + len);
    now += len;
  }
  // One step; `eval_batches` validation batches of `eval_forward` each,
  // `after_eval` (the counts' all_reduce, the snapshot), then the epoch's
  // iterator, before the iteration.
  // `slower` more forward work in the iteration (the first after an
  // evaluation: memory mapped again, caches cold).
  void Step(size_t eval_batches = 0, uint64_t eval_forward = 2 * kMs, uint64_t after_eval = 500'000,
            uint64_t slower = 0) {
    StepWindow w;
    w.index = steps.size();
    w.start_ns = now;
    now += 100'000;  // the loop's own code after the update
    if (eval_batches > 0) {
      Range(200'000);  // iter(val_loader)
      for (size_t b = 0; b < eval_batches; ++b) {
        Range(300'000);
        now += eval_forward;
      }
      now += after_eval;
      iterations.push_back(now);
      Range(3 * kMs);  // iter(train_loader): the workers start again
      now += 50'000;
    } else {
      iterations.push_back(now);
    }
    Range(kMs);       // the fetch
    now += 4 * kMs + slower;  // forward
    backward.push_back(now);
    now += 5 * kMs;   // backward and the update
    w.end_ns = now;
    steps.push_back(w);
  }
  uint64_t CpuNs(uint64_t from, uint64_t to) const {
    uint64_t ns = to - from;
    for (const auto& [a, b] : data) {
      const uint64_t lo = std::max(a, from), hi = std::min(b, to);
      if (hi > lo) ns -= hi - lo;
    }
    return ns;
  }
  std::vector<StepCpuWork> Work() const {
    std::vector<StepCpuWork> work;
    for (const StepWindow& w : steps) {
      auto b = std::lower_bound(backward.begin(), backward.end(), w.start_ns);
      work.push_back(StepCpuWork{{CpuNs(w.start_ns, *b), CpuNs(*b, w.end_ns)}});
    }
    return work;
  }
};

TEST(StepExtraWorkTest, ACpuStepWithAnEvaluationIsCutWhereTheEpochsIteratorBegins) {
  CpuLoop loop;
  for (int i = 0; i < 30; ++i) loop.Step(i == 10 || i == 20 ? 5 : 0);
  const std::vector<StepCpuWork> work = loop.Work();
  std::vector<size_t> marked;
  ASSERT_EQ(MarkExtraCpuWorkSteps(loop.steps, work, &marked), 2u);
  EXPECT_EQ(marked, (std::vector<size_t>{10, 20}));
  const uint64_t epoch_iteration_end = loop.steps[20].end_ns;
  auto cpu = [&loop](uint64_t from, uint64_t to) { return loop.CpuNs(from, to); };
  EXPECT_EQ(SplitExtraCpuWorkSteps(loop.steps, marked, work, loop.data, loop.backward, cpu), 2u);
  ASSERT_EQ(loop.steps.size(), 32u);
  for (size_t k = 0; k < loop.steps.size(); ++k) {
    const StepWindow& w = loop.steps[k];
    EXPECT_EQ(w.index, k);
    if (k > 0) EXPECT_EQ(w.start_ns, loop.steps[k - 1].end_ns) << "contiguous";
    const bool extra = k == 10 || k == 21;
    EXPECT_EQ(!w.left_out.empty(), extra) << "step " << k << ": " << w.left_out;
    EXPECT_EQ(w.warmup, extra) << "step " << k;
  }
  EXPECT_NE(loop.steps[21].left_out.find("from its data loading on, is measured on its own"), std::string::npos)
      << loop.steps[21].left_out;
  // The epoch's first iteration from its iterator on, the 3 ms wait for the
  // workers included; the evaluation's fetches are not chained to it.
  EXPECT_EQ(loop.steps[22].start_ns, loop.iterations[20]);
  EXPECT_EQ(loop.steps[22].end_ns, epoch_iteration_end);
}

TEST(StepExtraWorkTest, TheSlowerIterationAfterAnEvaluationIsStillCutOffAndMeasured) {
  // The iteration after each evaluation runs 10 ms more (2.1 steady
  // steps): more than 3/2 of a step, but less than the 10.5 ms of
  // evaluation left out before it.
  CpuLoop loop;
  for (int i = 0; i < 30; ++i) {
    const bool eval = i == 10 || i == 20;
    loop.Step(eval ? 5 : 0, 2 * kMs, 500'000, eval ? 10 * kMs : 0);
  }
  const std::vector<StepCpuWork> work = loop.Work();
  std::vector<size_t> marked;
  ASSERT_EQ(MarkExtraCpuWorkSteps(loop.steps, work, &marked), 2u);
  auto cpu = [&loop](uint64_t from, uint64_t to) { return loop.CpuNs(from, to); };
  EXPECT_EQ(SplitExtraCpuWorkSteps(loop.steps, marked, work, loop.data, loop.backward, cpu), 2u);
  ASSERT_EQ(loop.steps.size(), 32u);
  EXPECT_EQ(loop.steps[11].start_ns, loop.iterations[10]);
  EXPECT_TRUE(loop.steps[11].left_out.empty());
}

TEST(StepExtraWorkTest, ACpuStepIsNotCutWhereTheEvaluationWouldStayInTheIteration) {
  // Evaluation batches whose forward pass (and what follows the last) is
  // shorter than the gap that chains data ranges: the iteration would reach
  // back over them and hold the evaluation's CPU work (more than 3/2 of a
  // step): not cut.
  CpuLoop loop;
  for (int i = 0; i < 30; ++i) loop.Step(i == 10 || i == 20 ? 30 : 0, 300'000, 100'000);
  const std::vector<StepCpuWork> work = loop.Work();
  std::vector<size_t> marked;
  ASSERT_EQ(MarkExtraCpuWorkSteps(loop.steps, work, &marked), 2u);
  auto cpu = [&loop](uint64_t from, uint64_t to) { return loop.CpuNs(from, to); };
  EXPECT_EQ(SplitExtraCpuWorkSteps(loop.steps, marked, work, loop.data, loop.backward, cpu), 0u);
  EXPECT_EQ(loop.steps.size(), 30u);
  // No data range at all before the backward pass: nothing to cut at.
  loop.data.clear();
  EXPECT_EQ(SplitExtraCpuWorkSteps(loop.steps, marked, work, loop.data, loop.backward, cpu), 0u);
}

}  // namespace
}  // namespace gpuos

namespace gpuos {
namespace {

// A loop whose epochs end between two steps: optimizer-mark steps of a
// 1 ms fetch, 4 ms of forward and 5 ms of backward and update; at each
// epoch's end, `epoch_end_ms` of the loop's work (an evaluation pass, or
// only the old iterator's shutdown), then `iter(loader)` (a data range)
// forking 2 workers 15 ms apart.
struct EpochLoop {
  std::vector<StepWindow> steps;
  std::vector<uint64_t> forks, backward;
  std::vector<std::pair<uint64_t, uint64_t>> data;
  std::vector<uint64_t> iteration_starts;  // where each epoch's first iteration began
  uint64_t now = 1'000 * kMs;
  void Step(uint64_t epoch_end_ms = 0, bool new_epoch = false) {
    StepWindow w;
    w.index = steps.size();
    w.start_ns = now;
    if (new_epoch) {
      now += epoch_end_ms * kMs;
      iteration_starts.push_back(now);
      const uint64_t iter_start = now;
      now += kMs;
      forks.push_back(now);
      now += 15 * kMs;
      forks.push_back(now);
      now += 5 * kMs;
      data.emplace_back(iter_start, now);
    }
    data.emplace_back(now, now + kMs);
    now += kMs + 4 * kMs;
    backward.push_back(now);
    now += 5 * kMs;
    w.end_ns = now;
    steps.push_back(w);
  }
  uint64_t CpuNs(uint64_t from, uint64_t to) const {
    uint64_t ns = to - from;
    for (const auto& [a, b] : data) {
      const uint64_t lo = std::max(a, from), hi = std::min(b, to);
      if (hi > lo) ns -= hi - lo;
    }
    return ns;
  }
  size_t Split() {
    return SplitAtEpochStarts(steps, forks, data, backward, [this](uint64_t a, uint64_t b) { return CpuNs(a, b); });
  }
};

TEST(StepExtraWorkTest, AnEpochsEndBeforeItsWorkersStartIsCutOffTheIterationAfterIt) {
  EpochLoop loop;
  for (int i = 0; i < 30; ++i) loop.Step(i == 10 ? 40 : i == 20 ? 1 : 0, i == 10 || i == 20);
  // Step 10 is cut where its iterator began (the data range holding the
  // forks); step 20's 1 ms before the workers is no step of its own.
  EXPECT_EQ(loop.Split(), 1u);
  ASSERT_EQ(loop.steps.size(), 31u);
  EXPECT_NE(loop.steps[10].left_out.find("the end of an epoch"), std::string::npos) << loop.steps[10].left_out;
  EXPECT_NE(loop.steps[10].left_out.find("measured on its own"), std::string::npos);
  EXPECT_TRUE(loop.steps[10].warmup);
  EXPECT_EQ(loop.steps[10].end_ns, loop.iteration_starts[0]);
  EXPECT_EQ(loop.steps[11].start_ns, loop.iteration_starts[0]);
  EXPECT_TRUE(loop.steps[11].left_out.empty());
  EXPECT_FALSE(loop.steps[11].warmup);
  for (size_t k = 0; k < loop.steps.size(); ++k) {
    EXPECT_EQ(loop.steps[k].index, k);
    EXPECT_EQ(!loop.steps[k].left_out.empty(), k == 10) << k;
  }
}

TEST(StepExtraWorkTest, StepsFromBackwardPassesAreCutOnlyWhereTheEpochsEndOutweighsAStep) {
  // The same loop, its steps from one backward start to the next: the part
  // before the workers holds the last iteration's backward and update
  // (5 ms) whether or not an evaluation ran.
  for (const uint64_t epoch_end_ms : {uint64_t{2}, uint64_t{40}}) {
    EpochLoop loop;
    for (int i = 0; i < 30; ++i) loop.Step(i == 10 ? epoch_end_ms : 0, i == 10);
    std::vector<StepWindow> by_backward;
    for (size_t k = 0; k + 1 < loop.backward.size(); ++k) {
      StepWindow w;
      w.index = k;
      w.start_ns = loop.backward[k];
      w.end_ns = loop.backward[k + 1];
      by_backward.push_back(w);
    }
    loop.steps = by_backward;
    const bool evaluation = epoch_end_ms == 40;
    EXPECT_EQ(loop.Split(), evaluation ? 1u : 0u) << epoch_end_ms;
    if (evaluation) EXPECT_EQ(loop.steps[10].start_ns, loop.iteration_starts[0]);
  }
}


// A loop whose steps (optimizer marks) run 6 ms of the last update's tail,
// a 1 ms fetch, 4 ms of forward and 5 ms of backward and update.  In step
// 10 the loop first runs `before_ms` of its own work, then starts one
// iterator (5 ms, forking at 1 and 3 ms), then `between_ms` of its own
// work, waits 60 ms for a batch (not running), and starts another iterator
// the same way.  `ranges`: whether the Python hook's data ranges cover the
// iterators and fetches.
struct TwoIteratorLoop {
  std::vector<StepWindow> steps;
  std::vector<uint64_t> forks, backward;
  std::vector<std::pair<uint64_t, uint64_t>> data, waits;
  uint64_t first_iterator = 0;
  uint64_t now = 1'000 * kMs;
  TwoIteratorLoop(bool ranges, uint64_t before_ms, uint64_t between_ms) {
    for (int i = 0; i < 30; ++i) {
      StepWindow w;
      w.index = steps.size();
      w.start_ns = now;
      now += 6 * kMs;
      if (i == 10) {
        now += before_ms * kMs;
        first_iterator = StartIterator(ranges);
        now += between_ms * kMs;
        waits.emplace_back(now, now + 60 * kMs);
        if (ranges) data.emplace_back(now, now + 60 * kMs);
        now += 60 * kMs;
        StartIterator(ranges);
      }
      if (ranges) data.emplace_back(now, now + kMs);
      now += kMs + 4 * kMs;
      backward.push_back(now);
      now += 5 * kMs;
      w.end_ns = now;
      steps.push_back(w);
    }
  }
  uint64_t StartIterator(bool ranges) {
    const uint64_t start = now;
    forks.push_back(now + kMs);
    forks.push_back(now + 3 * kMs);
    if (ranges) data.emplace_back(now, now + 5 * kMs);
    now += 5 * kMs;
    return start;
  }
  uint64_t CpuNs(uint64_t from, uint64_t to) const {
    uint64_t ns = to - from;
    std::vector<std::pair<uint64_t, uint64_t>> idle = data;
    idle.insert(idle.end(), waits.begin(), waits.end());
    std::sort(idle.begin(), idle.end());
    uint64_t covered_to = from;
    for (const auto& [a, b] : idle) {
      const uint64_t lo = std::max(a, covered_to), hi = std::min(b, to);
      if (hi > lo) ns -= hi - lo;
      covered_to = std::max(covered_to, std::min(b, to));
    }
    return ns;
  }
  size_t Split() {
    return SplitAtEpochStarts(steps, forks, data, backward, [this](uint64_t a, uint64_t b) { return CpuNs(a, b); });
  }
};

TEST(StepExtraWorkTest, LoadersRestartedForOneIterationAreNoEpochsEnd) {
  // A semi-supervised loop's labeled and unlabeled loaders both ran out:
  // the loop started the first, finished its start and waited for its
  // batch, then started the second.  However long the first took (its
  // fork, its batch: 30 ms, three steps' work before a backward pass), the
  // part before the first holds only the update's tail, as every step.
  for (const bool ranges : {true, false}) {
    for (const uint64_t between_ms : {uint64_t{1}, uint64_t{30}}) {
      TwoIteratorLoop loop(ranges, 0, between_ms);
      EXPECT_EQ(loop.Split(), 0u) << ranges << " " << between_ms;
      EXPECT_EQ(loop.steps.size(), 30u);
      for (const StepWindow& w : loop.steps) EXPECT_TRUE(w.left_out.empty()) << w.index << " " << w.left_out;
    }
  }
}

TEST(StepExtraWorkTest, AnEpochsEndBeforeRestartedLoadersIsCutAtTheFirst) {
  for (const bool ranges : {true, false}) {
    TwoIteratorLoop loop(ranges, 40, 30);
    ASSERT_EQ(loop.Split(), 1u) << ranges;
    ASSERT_EQ(loop.steps.size(), 31u);
    EXPECT_NE(loop.steps[10].left_out.find("the end of an epoch"), std::string::npos);
    // With the hook's ranges the cut is the iterator's start, without them
    // its first fork.
    EXPECT_EQ(loop.steps[11].start_ns, loop.first_iterator + (ranges ? 0 : kMs)) << ranges;
  }
}

}  // namespace
}  // namespace gpuos
