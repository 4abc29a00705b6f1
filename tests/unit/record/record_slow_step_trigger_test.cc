// --flight-trigger slow-step=Nx (record/slow_step_trigger.h): which steps
// count as slow, from NVTX step ranges or the optimizer.step rhythm.
#include "record/slow_step_trigger.h"

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

v1::Event Range(uint32_t pid, uint64_t ts, uint64_t duration, const std::string& name) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  e.mutable_nvtx_range()->set_name(name);
  e.mutable_nvtx_range()->set_duration_ns(duration);
  return e;
}

constexpr uint64_t kMs = 1'000'000;

TEST(SlowStepTrigger, AStepRangeOverTheFactorTimesTheMedianTriggers) {
  SlowStepTrigger trigger(3.0);
  uint64_t ts = 0;
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(trigger.Observe(Range(1, ts, (100 + i % 3) * kMs, "step " + std::to_string(i)))) << i;
    ts += 110 * kMs;
  }
  // 2.9x: not slow.
  EXPECT_FALSE(trigger.Observe(Range(1, ts, 290 * kMs, "step 10")));
  auto slow = trigger.Observe(Range(1, ts, 350 * kMs, "step 11"));
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(absl::StrContains(*slow, "step 11")) << *slow;
  EXPECT_TRUE(absl::StrContains(*slow, "350.0 ms")) << *slow;
  // Right after a trigger, another slow step does not dump again at once.
  EXPECT_FALSE(trigger.Observe(Range(1, ts, 400 * kMs, "step 12")));
}

TEST(SlowStepTrigger, NeedsAFewStepsBeforeJudging) {
  SlowStepTrigger trigger(2.0);
  EXPECT_FALSE(trigger.Observe(Range(1, 0, 10 * kMs, "step 1")));
  EXPECT_FALSE(trigger.Observe(Range(1, 0, 1000 * kMs, "step 2")));
  // Other ranges are no steps, however long.
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(trigger.Observe(Range(1, 0, (i == 19 ? 9000 : 10) * kMs, "forward")));
}

TEST(SlowStepTrigger, OptimizerStepRhythmWithoutStepRanges) {
  SlowStepTrigger trigger(3.0);
  uint64_t ts = 0;
  for (int i = 0; i < 10; ++i) {
    ts += 50 * kMs;
    EXPECT_FALSE(trigger.Observe(Range(7, ts, kMs, "optimizer.step")));
  }
  ts += 400 * kMs;  // the step before this optimizer.step took 8x
  auto slow = trigger.Observe(Range(7, ts, kMs, "optimizer.step"));
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(absl::StrContains(*slow, "pid 7")) << *slow;
}

TEST(SlowStepTrigger, AGansTwoOptimizersMakeOneStepAnIteration) {
  // The discriminator's step 10 ms after the generator's, the generator's
  // 40 ms later: every 50 ms an iteration.  Counted per optimizer step, the
  // 10 ms halves would set the median and a normal 40 ms half would
  // trigger at 3x.
  SlowStepTrigger trigger(3.0);
  uint64_t ts = 0;
  for (int i = 0; i < 10; ++i) {
    ts += 10 * kMs;
    EXPECT_FALSE(trigger.Observe(Range(7, ts, kMs, "optimizer.step"))) << i;
    ts += 40 * kMs;
    EXPECT_FALSE(trigger.Observe(Range(7, ts, kMs, "optimizer.step#2"))) << i;
  }
  ts += 10 * kMs;
  EXPECT_FALSE(trigger.Observe(Range(7, ts, kMs, "optimizer.step")));
  ts += 190 * kMs;  // an iteration of 200 ms: 4x
  auto slow = trigger.Observe(Range(7, ts, kMs, "optimizer.step#2"));
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(absl::StrContains(*slow, "200.0 ms")) << *slow;
}

TEST(SlowStepTrigger, EachProcessHasItsOwnMedian) {
  SlowStepTrigger trigger(3.0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(trigger.Observe(Range(1, 0, 10 * kMs, "step")));
    EXPECT_FALSE(trigger.Observe(Range(2, 0, 100 * kMs, "step")));
  }
  // 100 ms is normal for pid 2, slow for pid 1.
  EXPECT_FALSE(trigger.Observe(Range(2, 0, 100 * kMs, "step")));
  EXPECT_TRUE(trigger.Observe(Range(1, 0, 100 * kMs, "step")).has_value());
}

}  // namespace
}  // namespace gpuos
