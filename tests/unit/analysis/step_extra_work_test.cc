// MarkExtraWorkSteps on constructed steps and GPU work: an evaluation pass
// (more work) and a checkpoint (kinds of work steady steps lack) are left
// out with the reason; a data stall (slower, same work), an occasional
// loss.item() and a warm-up step keep what they had; work that varies
// from step to step (dynamic shapes) marks nothing.
#include "analysis/step_extra_work.h"

#include <cstdint>
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

}  // namespace
}  // namespace gpuos
