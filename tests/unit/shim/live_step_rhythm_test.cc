// The shim's live step count from the rhythm of CUDA API calls
// (cupti_shim/live_step_rhythm.h), fed call ends as a training loop makes
// them: which call marks steps, from when, and what a step is.
#include "live_step_rhythm.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos_capture {
namespace {

constexpr uint32_t kMain = 100, kOther = 200;
constexpr uint32_t kSync = 126, kCopyIn = 277, kCopyOut = 279, kGraph = 514;
constexpr uint64_t kMs = 1'000'000;

struct Fed {
  std::vector<LiveStepRhythm::Outcome> outcomes;
  int found_at = -1;  // index of the call that found the rhythm
  std::vector<uint64_t> step_end_times;
};

// Step s of `step_ns` (plus `jitter(s)`), starting at 10 ms; calls at the
// given offsets into each step, each (thread, call, offset).
struct Call {
  uint32_t tid;
  uint32_t id;
  uint64_t offset_ns;
};
Fed Feed(LiveStepRhythm& rhythm, int steps, uint64_t step_ns, const std::vector<Call>& per_step,
         uint64_t (*jitter)(int) = nullptr) {
  Fed fed;
  uint64_t start = 10 * kMs;
  int index = 0;
  for (int s = 0; s < steps; ++s) {
    for (const Call& c : per_step) {
      LiveStepRhythm::Outcome out = rhythm.Add(c.tid, c.id, start + c.offset_ns);
      if (out.kind == LiveStepRhythm::Outcome::kFound) fed.found_at = index;
      if (out.kind != LiveStepRhythm::Outcome::kNone) fed.step_end_times.push_back(start + c.offset_ns);
      fed.outcomes.push_back(std::move(out));
      ++index;
    }
    start += step_ns + (jitter != nullptr ? jitter(s) : 0);
  }
  return fed;
}

TEST(LiveStepRhythm, OneSyncAStepIsFoundAfterMinStepsAndCountsEveryStep) {
  LiveStepRhythm rhythm;
  Fed fed = Feed(rhythm, 30, 5 * kMs, {{kMain, kSync, 4 * kMs}});
  ASSERT_TRUE(rhythm.found());
  EXPECT_EQ(rhythm.call(), kSync);
  EXPECT_EQ(rhythm.calls_per_step(), 1u);
  // Found at the 17th sync (16 intervals): steps 0..15 lie behind, step 16
  // begins.
  ASSERT_EQ(fed.found_at, 16);
  const LiveStepRhythm::Outcome& found = fed.outcomes[16];
  EXPECT_EQ(found.step, 16);
  ASSERT_EQ(found.ends.size(), 17u);
  EXPECT_EQ(found.ends.front(), 10 * kMs + 4 * kMs);
  EXPECT_EQ(found.ends.back(), 10 * kMs + 16 * 5 * kMs + 4 * kMs);
  // Every later sync ends one step and begins the next.
  for (int i = 17; i < 30; ++i) {
    EXPECT_EQ(fed.outcomes[i].kind, LiveStepRhythm::Outcome::kStepEnd) << i;
    EXPECT_EQ(fed.outcomes[i].step, i) << i;
  }
}

TEST(LiveStepRhythm, DenseCallsNeverMarkSteps) {
  LiveStepRhythm rhythm;
  std::vector<Call> calls;
  for (uint64_t t = 0; t < 5 * kMs; t += 50'000) calls.push_back({kMain, 999, t});
  Feed(rhythm, 30, 5 * kMs, calls);
  EXPECT_FALSE(rhythm.found());
}

TEST(LiveStepRhythm, ThreeSyncsAStepCountEveryThirdEndingTheLongestGap) {
  // PyTorch's blocking copies: the batch in (x, y: copy and synchronize
  // each), compute, then loss.item() (copy out and synchronize).  The
  // synchronizes come three times a step; the one after the compute ends
  // the longest gap and so ends the step.
  LiveStepRhythm rhythm;
  Fed fed = Feed(rhythm, 40, 6 * kMs,
                 {{kMain, kSync, 100'000}, {kMain, kSync, 200'000}, {kMain, kSync, 5'900'000}});
  ASSERT_TRUE(rhythm.found());
  EXPECT_EQ(rhythm.call(), kSync);
  EXPECT_EQ(rhythm.calls_per_step(), 3u);
  for (uint64_t t : fed.step_end_times) EXPECT_EQ((t - 10 * kMs) % (6 * kMs), 5'900'000u) << t;
  // Steps run on without a gap: step numbers go up by one each step.
  int64_t last = -1;
  for (const auto& out : fed.outcomes) {
    if (out.kind == LiveStepRhythm::Outcome::kNone) continue;
    if (last >= 0) {
      EXPECT_EQ(out.step, last + 1);
    }
    last = out.step;
  }
  EXPECT_EQ(last, 39);
}

TEST(LiveStepRhythm, IrregularCallsAreNotSteps) {
  // Syncs at random times, 0.1 to 20 ms apart: no stretch of them passes,
  // in 20 runs of 2,000 calls.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    LiveStepRhythm random_calls;
    std::mt19937 generator(seed);
    std::uniform_int_distribution<uint64_t> interval(100'000, 20 * kMs);
    uint64_t t = 0;
    for (int i = 0; i < 2000; ++i) {
      t += interval(generator);
      random_calls.Add(kMain, kSync, t);
    }
    EXPECT_FALSE(random_calls.found()) << "seed " << seed;
  }
}

TEST(LiveStepRhythm, StepsShorterThanTheMinimumAreNotCounted) {
  LiveStepRhythm rhythm;
  Feed(rhythm, 50, 500'000, {{kMain, kSync, 400'000}});
  EXPECT_FALSE(rhythm.found());
}

TEST(LiveStepRhythm, SlowFirstStepsDelayTheCountUntilTheLastStepsAreRegular) {
  LiveStepRhythm rhythm;
  // The first two steps (cuDNN's autotuning, the allocator's growth) are
  // 50x; one slow interval in 16 is excused as a pause, two are not.
  Fed fed = Feed(rhythm, 30, 5 * kMs, {{kMain, kCopyOut, 4 * kMs}},
                 [](int s) -> uint64_t { return s <= 1 ? 250 * kMs : 0; });
  ASSERT_TRUE(rhythm.found());
  // The first slow interval (call 0 to 1) must leave the learning window.
  EXPECT_EQ(fed.found_at, 17);
  EXPECT_GT(fed.outcomes[17].ends.front(), 10 * kMs + 250 * kMs);
}

TEST(LiveStepRhythm, OnlyTheAnchorThreadAndCallCountOnceFound) {
  LiveStepRhythm rhythm;
  Fed fed = Feed(rhythm, 30, 5 * kMs,
                 {{kMain, kCopyIn, 1 * kMs}, {kOther, kGraph, 2 * kMs}, {kMain, kSync, 4 * kMs}});
  ASSERT_TRUE(rhythm.found());
  // The first regular series is the first to have min_steps intervals:
  // the copy in, which comes first in each step.
  EXPECT_EQ(rhythm.tid(), kMain);
  EXPECT_EQ(rhythm.call(), kCopyIn);
  int step_ends = 0;
  for (const auto& out : fed.outcomes) step_ends += out.kind == LiveStepRhythm::Outcome::kStepEnd;
  EXPECT_EQ(step_ends, 30 - 17);
  EXPECT_EQ(rhythm.Add(kOther, kGraph, 10'000 * kMs).kind, LiveStepRhythm::Outcome::kNone);
  EXPECT_EQ(rhythm.Add(kMain, kCopyIn, 10'001 * kMs).kind, LiveStepRhythm::Outcome::kStepEnd);
}

TEST(LiveStepRhythm, StartUpCallsOnManyThreadsDoNotCrowdOutTheLoop) {
  // 200 threads each make a few copies at start-up (a parallel weight
  // load), more than the series followed at once; the loop's synchronize
  // that follows is still learned.
  LiveStepRhythm rhythm;
  uint64_t t = kMs;
  for (uint32_t thread = 1000; thread < 1200; ++thread) {
    for (int i = 0; i < 3; ++i) rhythm.Add(thread, kCopyIn, t += 10'000);
  }
  Fed fed = Feed(rhythm, 30, 5 * kMs, {{kMain, kSync, 4 * kMs}});
  ASSERT_TRUE(rhythm.found());
  EXPECT_EQ(rhythm.tid(), kMain);
  EXPECT_EQ(rhythm.call(), kSync);
  EXPECT_EQ(fed.found_at, 16);
}

}  // namespace
}  // namespace gpuos_capture
