// Capture windows in the shim without a GPU: the --capture spec parser
// (cupti_shim/capture_spec.h, shared with the agent's option parsing) and
// the window decisions (cupti_shim/capture_windows.h) fed step marks, NVTX
// ranges, time and on-demand requests as the job would make them.
#include <regex>
#include <string>
#include <vector>

#include "capture_spec.h"
#include "analysis/step_options.h"
#include "capture_windows.h"
#include "gtest/gtest.h"

namespace gpuos_capture {
namespace {

CaptureSpec Parse(const std::string& text) {
  CaptureSpec spec;
  std::string error;
  EXPECT_TRUE(ParseCaptureSpec(text, &spec, &error)) << text << ": " << error;
  return spec;
}

std::string ParseError(const std::string& text) {
  CaptureSpec spec;
  std::string error;
  EXPECT_FALSE(ParseCaptureSpec(text, &spec, &error)) << text;
  return error;
}

TEST(CaptureSpec, ParsesEachKind) {
  CaptureSpec steps = Parse("steps=10..14");
  EXPECT_EQ(steps.kind, CaptureSpec::kSteps);
  EXPECT_EQ(steps.first_step, 10u);
  EXPECT_EQ(steps.last_step, 14u);
  EXPECT_FALSE(steps.WantsStep(9));
  EXPECT_TRUE(steps.WantsStep(10));
  EXPECT_TRUE(steps.WantsStep(14));
  EXPECT_FALSE(steps.WantsStep(15));

  CaptureSpec every = Parse("every=200,steps=10");
  EXPECT_EQ(every.kind, CaptureSpec::kEvery);
  EXPECT_TRUE(every.WantsStep(0));
  EXPECT_TRUE(every.WantsStep(9));
  EXPECT_FALSE(every.WantsStep(10));
  EXPECT_TRUE(every.WantsStep(400));
  EXPECT_EQ(Parse("steps=1, every=20").kind, CaptureSpec::kEvery);  // either order, spaces

  CaptureSpec periodic = Parse("every=10s,steps=2");
  EXPECT_EQ(periodic.kind, CaptureSpec::kPeriodic);
  EXPECT_EQ(periodic.period_ns, 10'000'000'000u);
  EXPECT_EQ(periodic.count, 2u);
  EXPECT_FALSE(periodic.WantsStep(0));  // windows by time (CaptureWindows)
  CaptureSpec periodic_time = Parse("for=200ms, every=1m");
  EXPECT_EQ(periodic_time.kind, CaptureSpec::kPeriodic);
  EXPECT_EQ(periodic_time.period_ns, 60'000'000'000u);
  EXPECT_EQ(periodic_time.for_ns, 200'000'000u);
  EXPECT_EQ(periodic_time.count, 0u);
  // --always-on: two steps every 10 s, whatever the step's length.
  CaptureSpec always = Parse(kAlwaysOnSpec);
  EXPECT_EQ(always.kind, CaptureSpec::kPeriodic);
  EXPECT_EQ(always.count, 2u);

  CaptureSpec nvtx = Parse("nvtx=train step");
  EXPECT_EQ(nvtx.kind, CaptureSpec::kNvtx);
  EXPECT_EQ(nvtx.nvtx_name, "train step");

  CaptureSpec time = Parse("after=60s,for=10s");
  EXPECT_EQ(time.kind, CaptureSpec::kTime);
  EXPECT_EQ(time.after_ns, 60'000'000'000u);
  EXPECT_EQ(time.for_ns, 10'000'000'000u);
  EXPECT_EQ(Parse("after=1500ms,for=2m").for_ns, 120'000'000'000u);

  EXPECT_EQ(Parse("on-demand").kind, CaptureSpec::kOnDemand);
  EXPECT_EQ(Parse("  steps=1..2 ").text, "steps=1..2");
}

TEST(CaptureSpec, RefusesBadSpecsWithOneLine) {
  for (const std::string& bad :
       {"", "steps", "steps=", "steps=5", "steps=5..2", "steps=a..b", "steps=1..", "every=20",
        "every=0,steps=1", "every=20,steps=0", "every=5,steps=6", "every=20,steps=1..2", "nvtx=",
        "nvtx=a,steps=1..2", "after=60s", "for=10s", "after=60,for=10s", "after=60s,for=0s",
        "after=1x,for=1s", "frames=1..2", "steps=1..2,steps=3..4", "steps=1..2,every=3,x=1",
        "steps=99999999999999999999..1", "every=10s", "every=0s,steps=1", "every=10s,steps=0",
        "every=10s,for=10s", "every=10s,for=0ms", "every=1x,steps=1", "every=10s,after=1s"}) {
    const std::string error = ParseError(bad);
    EXPECT_EQ(error.rfind("--capture ", 0), 0u) << bad << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_NE(ParseError("steps=5..2").find("before the first"), std::string::npos);
  EXPECT_NE(ParseError("every=10s").find("needs steps=K or for=DURATION"), std::string::npos);
}

TEST(StepRangeNames, FollowTheReportsDefaultRule) {
  const std::vector<const char*> steps = {
      "step 12",  "Step12",      "iteration 3", "Batch 7",    "ProfilerStep#5", "profilerstep # 5", "step",
      "STEP #4",  "step\t3",    "step_12",     "iter_7",     "iter 7",         "Iter",             "step-3",
      "step: 4",  "step=4",      "train_step",  "train step", "trainstep 2",    "training_step_9",  "Training Step 4",
      "train-iter 3", "train_batch"};
  const std::vector<const char*> others = {
      "forward",   "steps 1",      "step 1a",    "my step 1", "get batch", "step##4",     "optimizer.step",
      "step 12 ",  "iterations 3", "step__4",    "train",     "training",  "train_loop", "epoch 1 step 2",
      "iterate 2", "train__step"};
  const std::regex report_rule(gpuos::kDefaultStepRegex, std::regex::ECMAScript | std::regex::icase);
  for (const char* name : steps) {
    EXPECT_TRUE(IsStepRangeName(name)) << name;
    EXPECT_TRUE(std::regex_match(name, report_rule)) << name;
  }
  for (const char* name : others) {
    EXPECT_FALSE(IsStepRangeName(name)) << name;
    EXPECT_EQ(std::regex_match(name, report_rule), IsStepRangeName(name)) << name;
  }
  EXPECT_EQ(StepNumber("step 12"), 12);
  EXPECT_EQ(StepNumber("ProfilerStep#5"), 5);
  EXPECT_EQ(StepNumber("train_step_9"), 9);
  EXPECT_EQ(StepNumber("step"), -1);
}

// Feeds steps first..last (numbered) and returns the edges as strings.
std::vector<std::string> RunSteps(CaptureWindows& w, int64_t first, int64_t last, bool numbered = true) {
  std::vector<std::string> edges;
  for (int64_t i = first; i <= last; ++i) {
    CaptureEdge e = w.StepBegins(numbered ? i : -1);
    if (e.kind == CaptureEdge::kOpen) edges.push_back("open " + std::to_string(e.step));
    e = w.StepEnds();
    if (e.kind == CaptureEdge::kClose) edges.push_back("close " + std::to_string(e.step));
  }
  return edges;
}

TEST(CaptureWindows, AStepRangeIsOneWindowFromItsFirstStepToItsLast) {
  CaptureWindows w(Parse("steps=10..14"));
  EXPECT_EQ(RunSteps(w, 0, 30), (std::vector<std::string>{"open 10", "close 14"}));
  EXPECT_FALSE(w.open());
}

TEST(CaptureWindows, UnnumberedStepsCountFromZero) {
  CaptureWindows w(Parse("steps=3..4"));
  EXPECT_EQ(RunSteps(w, 0, 9, /*numbered=*/false), (std::vector<std::string>{"open 3", "close 4"}));
}

TEST(CaptureWindows, EveryNOpensKStepsInEachPeriod) {
  CaptureWindows w(Parse("every=20,steps=2"));
  EXPECT_EQ(RunSteps(w, 0, 59),
            (std::vector<std::string>{"open 0", "close 1", "open 20", "close 21", "open 40", "close 41"}));
  CaptureWindows always(Parse("every=20,steps=1"));
  EXPECT_EQ(RunSteps(always, 1, 45), (std::vector<std::string>{"open 20", "close 20", "open 40", "close 40"}));
}

TEST(CaptureWindows, OnDemandCapturesTheNextNStepsFromTheNextStart) {
  CaptureWindows w(Parse("on-demand"));
  EXPECT_TRUE(RunSteps(w, 0, 4).empty());
  // Asked in the middle of step 5: steps 6, 7, 8.
  EXPECT_EQ(w.StepBegins(5).kind, CaptureEdge::kNone);
  w.RequestSteps(3);
  EXPECT_EQ(w.StepEnds().kind, CaptureEdge::kNone);
  CaptureEdge open = w.StepBegins(6);
  EXPECT_EQ(open.kind, CaptureEdge::kOpen);
  EXPECT_EQ(open.reason, "ctl capture 3");
  EXPECT_EQ(w.StepEnds().kind, CaptureEdge::kNone);
  EXPECT_EQ(RunSteps(w, 7, 12), (std::vector<std::string>{"close 8"}));
  // A request joins a spec's window: always-on's step 20 plus two more.
  CaptureWindows both(Parse("every=20,steps=1"));
  RunSteps(both, 0, 18);
  both.RequestSteps(3);
  EXPECT_EQ(RunSteps(both, 19, 25), (std::vector<std::string>{"open 19", "close 21"}));
}

TEST(CaptureWindows, NvtxWindowsFollowTheNamedRangesOnly) {
  CaptureWindows w(Parse("nvtx=profile me"));
  EXPECT_EQ(w.RangeBegins("forward").kind, CaptureEdge::kNone);
  EXPECT_EQ(w.RangeBegins("profile me").kind, CaptureEdge::kOpen);
  EXPECT_EQ(w.RangeBegins("profile me").kind, CaptureEdge::kNone);  // nested
  EXPECT_EQ(w.StepEnds().kind, CaptureEdge::kNone);                // steps do not close it
  EXPECT_EQ(w.RangeEnds("profile me").kind, CaptureEdge::kNone);
  EXPECT_EQ(w.RangeEnds("forward").kind, CaptureEdge::kNone);
  EXPECT_EQ(w.RangeEnds("profile me").kind, CaptureEdge::kClose);
  EXPECT_EQ(w.RangeEnds("profile me").kind, CaptureEdge::kNone);  // unbalanced
}

TEST(CaptureWindows, ATimeWindowOpensOnceForItsSpan) {
  CaptureWindows w(Parse("after=1s,for=500ms"));
  EXPECT_EQ(w.Tick(999'999'999).kind, CaptureEdge::kNone);
  EXPECT_EQ(w.Tick(1'000'000'000).kind, CaptureEdge::kOpen);
  EXPECT_EQ(w.Tick(1'200'000'000).kind, CaptureEdge::kNone);
  EXPECT_EQ(w.Tick(1'500'000'000).kind, CaptureEdge::kClose);
  EXPECT_EQ(w.Tick(1'200'000'000).kind, CaptureEdge::kNone);  // never again
}

// Steps first..last of `step_ns` each from time first*step_ns, the shim's
// timer ticking at each step's start; returns the edges as "open N",
// "close N".
std::vector<std::string> RunTimedSteps(CaptureWindows& w, int64_t first, int64_t last, uint64_t step_ns) {
  std::vector<std::string> edges;
  auto note = [&edges](const CaptureEdge& e) {
    if (e.kind == CaptureEdge::kOpen) edges.push_back("open " + std::to_string(e.step));
    if (e.kind == CaptureEdge::kClose) edges.push_back("close " + std::to_string(e.step));
  };
  for (int64_t i = first; i <= last; ++i) {
    note(w.Tick(static_cast<uint64_t>(i) * step_ns));
    note(w.StepBegins(i));
    note(w.StepEnds());
  }
  return edges;
}

TEST(CaptureWindows, EveryDurationOpensKStepsOncePerPeriod) {
  // 100 ms steps, two steps every second: the first two, then the first
  // two to begin after each second.
  CaptureWindows w(Parse("every=1s,steps=2"));
  EXPECT_EQ(RunTimedSteps(w, 0, 34, 100'000'000),
            (std::vector<std::string>{"open 0", "close 1", "open 10", "close 11", "open 20", "close 21", "open 30",
                                      "close 31"}));
  // 1 ms steps: still one window a second, not one every so many steps.
  CaptureWindows fast(Parse("every=1s,steps=2"));
  EXPECT_EQ(RunTimedSteps(fast, 0, 2500, 1'000'000),
            (std::vector<std::string>{"open 0", "close 1", "open 1000", "close 1001", "open 2000", "close 2001"}));
}

TEST(CaptureWindows, EveryDurationWithoutStepMarksFallsBackToTimeWindows) {
  CaptureWindows w(Parse("every=1s,steps=2"));
  EXPECT_EQ(w.NextTickNs(0), 0u);
  EXPECT_EQ(w.Tick(0).kind, CaptureEdge::kNone);  // the first step to begin would open it
  EXPECT_EQ(w.NextTickNs(0), 1'000'000'000u);
  // No step began in a whole period: a time window of kUnmarkedWindowNs.
  const CaptureEdge open = w.Tick(1'000'000'000);
  EXPECT_EQ(open.kind, CaptureEdge::kOpen);
  EXPECT_EQ(open.step, -1);
  EXPECT_NE(open.reason.find("no step marks: 200 ms"), std::string::npos) << open.reason;
  EXPECT_EQ(w.NextTickNs(1'000'000'000), 1'000'000'000u + kUnmarkedWindowNs);
  EXPECT_EQ(w.Tick(1'100'000'000).kind, CaptureEdge::kNone);
  EXPECT_EQ(w.Tick(1'200'000'000).kind, CaptureEdge::kClose);
  EXPECT_EQ(w.Tick(2'000'000'000).kind, CaptureEdge::kOpen);  // and each period after
  EXPECT_EQ(w.Tick(2'200'000'000).kind, CaptureEdge::kClose);
  // Step marks come: step windows from the next period on.
  EXPECT_EQ(RunTimedSteps(w, 25, 45, 100'000'000), (std::vector<std::string>{"open 30", "close 31", "open 40",
                                                                              "close 41"}));
}

TEST(CaptureWindows, EveryDurationForDurationIsATimeWindowEachPeriod) {
  CaptureWindows w(Parse("every=1s,for=100ms"));
  EXPECT_EQ(w.Tick(0).kind, CaptureEdge::kOpen);
  EXPECT_EQ(w.NextTickNs(0), 100'000'000u);
  EXPECT_EQ(w.StepBegins(0).kind, CaptureEdge::kNone);  // steps neither open nor close it
  EXPECT_EQ(w.StepEnds().kind, CaptureEdge::kNone);
  EXPECT_EQ(w.Tick(100'000'000).kind, CaptureEdge::kClose);
  EXPECT_EQ(w.Tick(999'000'000).kind, CaptureEdge::kNone);
  EXPECT_EQ(w.Tick(1'000'000'000).kind, CaptureEdge::kOpen);
  EXPECT_EQ(w.Tick(1'100'000'000).kind, CaptureEdge::kClose);
}

// Runs steps first..last and returns the gap NextWindowGap() gives after
// each window's close: "far" per `policy` (given `step_ns`) or not.
std::vector<std::string> GapsAtCloses(CaptureWindows& w, int64_t first, int64_t last,
                                      const FinalizeGapPolicy& policy, uint64_t step_ns) {
  std::vector<std::string> out;
  for (int64_t i = first; i <= last; ++i) {
    w.StepBegins(i);
    if (w.StepEnds().kind != CaptureEdge::kClose) continue;
    const WindowGap gap = w.NextWindowGap();
    std::string text = gap.kind == WindowGap::kNone      ? "none"
                       : gap.kind == WindowGap::kUnknown ? "unknown"
                                                         : std::to_string(gap.steps);
    out.push_back(std::to_string(i) + ":" + text + (GapIsFar(gap, policy, step_ns) ? " far" : ""));
  }
  return out;
}

FinalizeGapPolicy Gap(const std::string& text) {
  FinalizeGapPolicy policy;
  std::string error;
  EXPECT_TRUE(ParseFinalizeGap(text, &policy, &error)) << text << ": " << error;
  return policy;
}

TEST(FinalizeGap, ParsesStepsDurationsOffAndTheDefault) {
  FinalizeGapPolicy fallback = Gap("");
  EXPECT_TRUE(fallback.enabled);
  EXPECT_EQ(fallback.text, kDefaultFinalizeGap);
  EXPECT_EQ(fallback.min_steps, 0u);
  EXPECT_EQ(fallback.min_ns, 200'000'000u);
  FinalizeGapPolicy steps = Gap("1");
  EXPECT_EQ(steps.min_steps, 1u);
  EXPECT_EQ(steps.min_ns, 0u);
  FinalizeGapPolicy both = Gap("200steps, 250ms");
  EXPECT_EQ(both.min_steps, 200u);
  EXPECT_EQ(both.min_ns, 250'000'000u);
  EXPECT_FALSE(Gap("off").enabled);
  EXPECT_FALSE(Gap("0").enabled);
  FinalizeGapPolicy bad;
  std::string error;
  EXPECT_FALSE(ParseFinalizeGap("often", &bad, &error));
  EXPECT_FALSE(bad.enabled);
  EXPECT_NE(error.find("GPUOS_CAPTURE_FINALIZE_GAP=often"), std::string::npos) << error;
}

TEST(FinalizeGap, EveryNLeavesNMinusKStepsBetweenWindows) {
  CaptureWindows always(Parse("every=20,steps=1"));
  // 19 steps of 1 ms between windows: far for "1" and "10", not for the
  // default (200 ms) nor for 19 steps < 50 ms.
  EXPECT_EQ(GapsAtCloses(always, 0, 45, Gap("1"), 1'000'000),
            (std::vector<std::string>{"0:19 far", "20:19 far", "40:19 far"}));
  EXPECT_EQ(GapsAtCloses(always, 46, 65, Gap(""), 1'000'000), (std::vector<std::string>{"60:19"}));
  EXPECT_EQ(GapsAtCloses(always, 66, 85, Gap("50ms"), 1'000'000), (std::vector<std::string>{"80:19"}));
  EXPECT_EQ(GapsAtCloses(always, 86, 105, Gap("50ms"), 3'000'000), (std::vector<std::string>{"100:19 far"}));
  EXPECT_EQ(GapsAtCloses(always, 106, 125, Gap("off"), 1'000'000), (std::vector<std::string>{"120:19"}));
  // every=200,steps=2 (the earlier --always-on): 198 steps between windows,
  // far for the default once a step takes about 1 ms or more (198 ms + the
  // step's own), not at 0.5 ms.
  CaptureWindows preset(Parse("every=200,steps=2"));
  EXPECT_EQ(GapsAtCloses(preset, 0, 250, Gap(""), 1'100'000), (std::vector<std::string>{"1:198 far", "201:198 far"}));
  CaptureWindows fast(Parse("every=200,steps=2"));
  EXPECT_EQ(GapsAtCloses(fast, 0, 50, Gap(""), 500'000), (std::vector<std::string>{"1:198"}));
  CaptureWindows two(Parse("every=10,steps=3"));
  EXPECT_EQ(GapsAtCloses(two, 0, 15, Gap("7"), 0), (std::vector<std::string>{"2:7 far", "12:7 far"}));
  EXPECT_EQ(GapsAtCloses(two, 16, 25, Gap("8"), 0), (std::vector<std::string>{"22:7"}));
}

TEST(FinalizeGap, AfterTheLastWindowNoneComes) {
  CaptureWindows range(Parse("steps=10..14"));
  EXPECT_EQ(range.NextWindowGap().kind, WindowGap::kSteps);  // before step 0: 10 to go
  EXPECT_EQ(range.NextWindowGap().steps, 10u);
  EXPECT_EQ(GapsAtCloses(range, 0, 30, Gap("off"), 0), (std::vector<std::string>{"14:none"}));
  EXPECT_TRUE(GapIsFar(range.NextWindowGap(), Gap("100000"), 0));
  CaptureWindows demand(Parse("on-demand"));
  EXPECT_EQ(demand.NextWindowGap().kind, WindowGap::kNone);
  demand.RequestSteps(2);
  EXPECT_EQ(demand.NextWindowGap().kind, WindowGap::kSteps);  // the next step is wanted
  EXPECT_EQ(demand.NextWindowGap().steps, 0u);
  EXPECT_FALSE(GapIsFar(demand.NextWindowGap(), Gap("1"), 0));
  EXPECT_EQ(GapsAtCloses(demand, 0, 5, Gap("1"), 0), (std::vector<std::string>{"1:none far"}));
}

TEST(FinalizeGap, WindowsNotBoundToStepsAreNotPredicted) {
  CaptureWindows nvtx(Parse("nvtx=profile me"));
  EXPECT_EQ(nvtx.NextWindowGap().kind, WindowGap::kUnknown);
  EXPECT_FALSE(GapIsFar(nvtx.NextWindowGap(), Gap("1"), 1'000'000'000));
  CaptureWindows time(Parse("after=1s,for=500ms"));
  EXPECT_EQ(time.NextWindowGap().kind, WindowGap::kUnknown);
  time.Tick(1'000'000'000);
  time.Tick(1'500'000'000);
  EXPECT_EQ(time.NextWindowGap().kind, WindowGap::kNone);
}

TEST(FinalizeGap, EveryDurationGapsAreTimeToTheNextPeriod) {
  CaptureWindows w(Parse("every=1s,steps=2"));
  EXPECT_EQ(w.NextWindowGap(0).kind, WindowGap::kSteps);  // the first step opens one
  EXPECT_EQ(RunTimedSteps(w, 0, 1, 100'000'000), (std::vector<std::string>{"open 0", "close 1"}));
  const WindowGap gap = w.NextWindowGap(200'000'000);
  EXPECT_EQ(gap.kind, WindowGap::kTime);
  EXPECT_EQ(gap.ns, 800'000'000u);
  EXPECT_TRUE(GapIsFar(gap, Gap(""), 100'000'000));  // 800 ms >= 200 ms
  EXPECT_FALSE(GapIsFar(gap, Gap("2s"), 100'000'000));
  EXPECT_TRUE(GapIsFar(gap, Gap("8"), 100'000'000));   // 8 steps of 100 ms
  EXPECT_FALSE(GapIsFar(gap, Gap("9"), 100'000'000));
  EXPECT_FALSE(GapIsFar(gap, Gap("off"), 100'000'000));
}

}  // namespace
}  // namespace gpuos_capture
