// StepLocator (pass 1): the default step regex on the names users write,
// the choice of the launching thread, step indices, nesting, warmup, the
// optimizer.step fallback, the no-steps case, bad regexes and data-worker
// roles; and AnalyzeStepEvents' summaries over measured steps.
#include "analysis/step_finder.h"

#include <string>
#include <vector>

#include "analysis/step_analysis.h"
#include "analysis/step_name_matcher.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

v1::Event Range(uint32_t pid, uint32_t tid, uint64_t start, uint64_t end, const std::string& name,
                const std::string& domain = "") {
  v1::Event e;
  e.set_ts_ns(start);
  e.set_pid(pid);
  e.set_tid(tid);
  e.mutable_nvtx_range()->set_duration_ns(end - start);
  e.mutable_nvtx_range()->set_name(name);
  e.mutable_nvtx_range()->set_domain(domain);
  return e;
}

v1::Event ProcessStart(uint64_t ts, uint32_t pid, uint32_t ppid, const std::string& comm) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm(comm);
  return e;
}

v1::Event ThreadStart(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  e.mutable_thread_start()->set_comm(comm);
  return e;
}

v1::Event Rename(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  e.mutable_comm_change()->set_new_comm(comm);
  return e;
}

StepPlan Locate(const std::vector<v1::Event>& events, const StepOptions& options = {}) {
  auto locator = StepLocator::Create(options);
  EXPECT_TRUE(locator.ok()) << locator.status();
  for (const v1::Event& e : events) (*locator)->Add(e);
  return (*locator)->Finish();
}

bool DefaultStepMatch(const std::string& name) {
  auto m = StepNameMatcher::Create(kDefaultStepRegex, "test");
  EXPECT_TRUE(m.ok());
  return m->Matches(name);
}

TEST(StepFinderTest, DefaultStepRegex) {
  for (const char* yes : {"step", "step 12", "Step 12", "STEP", "step12", "step #3", "Batch 3", "batch",
                          "ProfilerStep#5", "profilerstep#5", "ProfilerStep 5", "iteration 7", "Iteration",
                          "step  3", "step_3", "iter_7", "train_step", "training step 3", "Train Iter 2"}) {
    EXPECT_TRUE(DefaultStepMatch(yes)) << yes;
  }
  for (const char* no : {"get batch", "optimizer step", "optimizer.step", "step forward", "steps", "batch 3a",
                         "", "step 3 ", "ProfilerStep#5#", "train", "epoch 2 step 3", "iterations"}) {
    EXPECT_FALSE(DefaultStepMatch(no)) << no;
  }
}

TEST(StepFinderTest, DefaultDataRangeRegex) {
  auto m = StepNameMatcher::Create(kDefaultDataRangeRegex, "test");
  ASSERT_TRUE(m.ok());
  for (const char* yes : {"get batch", "Get Batch", "get_batch", "getbatch", "DataLoader fetch", "DataLoader iter", "dataloader",
                          "fetch batch", "load batch", "next batch", "data loading", "load data"}) {
    EXPECT_TRUE(m->Matches(yes)) << yes;
  }
  for (const char* no : {"copy batch", "pin batch", "forward", "step 3", "get batch 2", "batch"}) {
    EXPECT_FALSE(m->Matches(no)) << no;
  }
}

TEST(StepFinderTest, TrailingNumber) {
  EXPECT_EQ(TrailingNumber("step 12"), 12);
  EXPECT_EQ(TrailingNumber("ProfilerStep#5"), 5);
  EXPECT_EQ(TrailingNumber("step"), -1);
  EXPECT_EQ(TrailingNumber("12"), 12);
  EXPECT_EQ(TrailingNumber("step 99999999999999999999999"), -1);
  EXPECT_EQ(TrailingNumber("step 7  "), 7);
}

TEST(StepFinderTest, PicksTheThreadWithMostStepRangesAndIndexesByName) {
  std::vector<v1::Event> events = {
      // Thread 10: three steps, out of order in the file, one unnumbered.
      Range(10, 10, 300, 400, "step 7"), Range(10, 10, 100, 200, "step 5"), Range(10, 10, 200, 300, "step"),
      // Other ranges on it do not count.
      Range(10, 10, 110, 150, "get batch"), Range(10, 10, 150, 190, "forward"),
      // Thread 11 of the same process: two steps.
      Range(10, 11, 0, 50, "Batch 1"), Range(10, 11, 50, 90, "Batch 2"),
      // A zero-length range is no step.
      Range(12, 12, 10, 10, "step 1"), Range(12, 12, 11, 11, "step 2"), Range(12, 12, 12, 12, "step 3"),
      Range(12, 12, 13, 13, "step 4")};
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kNvtxRanges);
  EXPECT_EQ(plan.pid, 10u);
  EXPECT_EQ(plan.tid, 10u);
  EXPECT_EQ(plan.other_threads_with_steps, 1u);
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].start_ns, 100u);
  EXPECT_EQ(plan.steps[0].end_ns, 200u);
  EXPECT_EQ(plan.steps[0].index, 5u);
  EXPECT_EQ(plan.steps[1].index, 1u);  // unnumbered: its ordinal
  EXPECT_EQ(plan.steps[2].index, 7u);
  EXPECT_TRUE(plan.steps[0].warmup);
  EXPECT_FALSE(plan.steps[1].warmup);
  EXPECT_FALSE(plan.steps[2].warmup);
}

TEST(StepFinderTest, TieGoesToTheThreadThatStartsFirst) {
  StepPlan plan = Locate({Range(20, 21, 500, 600, "step 1"), Range(20, 21, 600, 700, "step 2"),
                          Range(30, 30, 400, 500, "iteration 1"), Range(30, 30, 800, 900, "iteration 2")});
  EXPECT_EQ(plan.pid, 30u);
  EXPECT_EQ(plan.tid, 30u);
}

TEST(StepFinderTest, NestedStepRangesKeepTheOuterOne) {
  // The profiler's ProfilerStep#N around the user's "step N".
  StepPlan plan = Locate({Range(1, 1, 100, 200, "ProfilerStep#0"), Range(1, 1, 110, 190, "step 0"),
                          Range(1, 1, 200, 300, "ProfilerStep#1"), Range(1, 1, 200, 300, "step 1")});
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].start_ns, 100u);
  EXPECT_EQ(plan.steps[0].end_ns, 200u);
  EXPECT_EQ(plan.steps[1].start_ns, 200u);
  EXPECT_EQ(plan.steps[1].end_ns, 300u);
}

TEST(StepFinderTest, WarmupCountAndCustomRegex) {
  StepOptions options;
  options.warmup_steps = 2;
  options.step_regex = R"(^train_iter_\d+$)";
  StepPlan plan = Locate({Range(1, 1, 0, 10, "step 0"), Range(1, 2, 0, 10, "train_iter_0"),
                          Range(1, 2, 10, 20, "TRAIN_ITER_1"), Range(1, 2, 20, 30, "train_iter_2")},
                         options);
  EXPECT_EQ(plan.tid, 2u);
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_TRUE(plan.steps[0].warmup);
  EXPECT_TRUE(plan.steps[1].warmup);
  EXPECT_FALSE(plan.steps[2].warmup);
  EXPECT_EQ(plan.steps[2].index, 2u);

  options.warmup_steps = 0;
  plan = Locate({Range(1, 2, 0, 10, "train_iter_0")}, options);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_FALSE(plan.steps[0].warmup);
}

TEST(StepFinderTest, OptimizerStepFallback) {
  // No step ranges: steps run from one optimizer.step end to the next.
  StepPlan plan = Locate({Range(5, 5, 100, 120, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 300, 330, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 510, 520, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 50, 90, "DataLoader fetch", "gpuos.python"),
                          Range(5, 6, 0, 10, "optimizer.step", "gpuos.python")});
  ASSERT_EQ(plan.source, StepSource::kOptimizerSteps);
  EXPECT_EQ(plan.tid, 5u);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].start_ns, 120u);
  EXPECT_EQ(plan.steps[0].end_ns, 330u);
  EXPECT_EQ(plan.steps[0].index, 1u);
  EXPECT_TRUE(plan.steps[0].warmup);
  EXPECT_EQ(plan.steps[1].start_ns, 330u);
  EXPECT_EQ(plan.steps[1].end_ns, 520u);
  EXPECT_EQ(plan.steps[1].index, 2u);

  // Step ranges win over optimizer ranges.
  plan = Locate({Range(5, 5, 100, 120, "optimizer.step"), Range(5, 5, 300, 330, "optimizer.step"),
                 Range(5, 5, 0, 400, "step 0")});
  EXPECT_EQ(plan.source, StepSource::kNvtxRanges);
  ASSERT_EQ(plan.steps.size(), 1u);

  // One optimizer step makes no interval.
  plan = Locate({Range(5, 5, 100, 120, "optimizer.step")});
  EXPECT_EQ(plan.source, StepSource::kNone);
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_NE(plan.note.find("only one"), std::string::npos) << plan.note;
}

TEST(StepFinderTest, OptimizerStepsOfSeveralOptimizersMakeOneStepACycle) {
  // A GAN: the discriminator's "optimizer.step", then the generator's
  // "optimizer.step#2", every iteration: steps end at the generator's.
  StepPlan plan = Locate({Range(5, 5, 100, 110, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 200, 210, "optimizer.step#2", "gpuos.python"),
                          Range(5, 5, 300, 310, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 400, 410, "optimizer.step#2", "gpuos.python"),
                          Range(5, 5, 500, 510, "optimizer.step", "gpuos.python"),
                          Range(5, 5, 600, 610, "optimizer.step#2", "gpuos.python")});
  ASSERT_EQ(plan.source, StepSource::kOptimizerSteps);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].start_ns, 210u);
  EXPECT_EQ(plan.steps[0].end_ns, 410u);
  EXPECT_EQ(plan.steps[0].index, 1u);
  EXPECT_EQ(plan.steps[1].start_ns, 410u);
  EXPECT_EQ(plan.steps[1].end_ns, 610u);
  EXPECT_NE(plan.note.find("2 optimizers"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("\"optimizer.step#2\""), std::string::npos) << plan.note;

  // A wrapper's step around the optimizer it wraps, both marked (traces
  // from before the hook marked only the outer one): one step each.
  plan = Locate({Range(5, 5, 100, 150, "optimizer.step"), Range(5, 5, 110, 140, "optimizer.step#2"),
                 Range(5, 5, 300, 350, "optimizer.step"), Range(5, 5, 310, 340, "optimizer.step#2"),
                 Range(5, 5, 500, 550, "optimizer.step"), Range(5, 5, 510, 540, "optimizer.step#2")});
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].start_ns, 150u);
  EXPECT_EQ(plan.steps[0].end_ns, 350u);
  EXPECT_EQ(plan.steps[1].end_ns, 550u);
  EXPECT_TRUE(plan.note.empty()) << plan.note;

  // Names that only look like the hook's are not optimizer steps.
  plan = Locate({Range(5, 5, 100, 110, "optimizer.step#x"), Range(5, 5, 200, 210, "optimizer.steps"),
                 Range(5, 5, 300, 310, "optimizer.step#1")});
  EXPECT_NE(plan.source, StepSource::kOptimizerSteps);
}

TEST(StepFinderTest, NoStepsSaysWhy) {
  StepPlan plan = Locate({Range(1, 1, 0, 100, "forward"), ProcessStart(0, 1, 0, "python")});
  EXPECT_EQ(plan.source, StepSource::kNone);
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_NE(plan.note.find("no NVTX range is named like a training step"), std::string::npos) << plan.note;

  auto analysis = AnalyzeStepEvents(v1::TraceHeader(), {Range(1, 1, 0, 100, "forward")}, StepOptions());
  ASSERT_TRUE(analysis.ok());
  EXPECT_FALSE(analysis->has_steps());
  EXPECT_EQ(analysis->measured_steps, 0u);
  EXPECT_EQ(analysis->note, plan.note);
}

TEST(StepFinderTest, BadRegexIsAnError) {
  StepOptions options;
  options.step_regex = "step (";
  auto locator = StepLocator::Create(options);
  ASSERT_FALSE(locator.ok());
  EXPECT_EQ(locator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(locator.status().message().find("--step-regex"), absl::string_view::npos);

  options = StepOptions();
  options.data_range_regex = "[get";
  auto analysis = AnalyzeStepEvents(v1::TraceHeader(), {}, options);
  ASSERT_FALSE(analysis.ok());
  EXPECT_NE(analysis.status().message().find("--data-range-regex"), absl::string_view::npos);
}

TEST(StepFinderTest, DataWorkerRoles) {
  std::vector<v1::Event> events = {
      ProcessStart(0, 100, 1, "bash"),
      ProcessStart(1, 200, 100, "python"),  // the trainer
      ThreadStart(2, 200, 201, "python"),
      ThreadStart(2, 200, 202, "pt_data_worker"),  // a worker thread in the trainer
      ProcessStart(3, 300, 200, "python"),         // DataLoader worker (child)
      ThreadStart(4, 300, 301, "python"),
      ProcessStart(5, 400, 300, "python"),  // grandchild
      ProcessStart(6, 500, 100, "python"),  // sibling: not a worker ...
      ProcessStart(7, 600, 100, "python"),
      Rename(8, 600, 600, "gpuos-data-3"),  // ... unless named like one
      Range(200, 200, 10, 20, "step 1"),
  };
  StepPlan plan = Locate(events);
  EXPECT_EQ(plan.pid, 200u);
  EXPECT_EQ(plan.thread_comm, "python");
  EXPECT_TRUE(plan.IsWorker(300, 300));
  EXPECT_TRUE(plan.IsWorker(300, 301));
  EXPECT_TRUE(plan.IsWorker(400, 400));
  EXPECT_TRUE(plan.IsWorker(600, 600));
  EXPECT_TRUE(plan.IsWorker(200, 202));
  EXPECT_FALSE(plan.IsWorker(200, 200));
  EXPECT_FALSE(plan.IsWorker(200, 201));
  EXPECT_FALSE(plan.IsWorker(500, 500));
  EXPECT_FALSE(plan.IsWorker(100, 100));
  EXPECT_EQ(plan.worker_processes, 3u);  // 300, 400, 600
}

TEST(StepFinderTest, LaunchingThreadCommIsTheLatest) {
  StepPlan plan = Locate({Rename(50, 7, 7, "trainer-main"), ProcessStart(0, 7, 1, "python"),
                          Range(7, 7, 100, 200, "step 0")});
  EXPECT_EQ(plan.thread_comm, "trainer-main");
}

TEST(StepFinderTest, SummariesSkipWarmupUnlessEveryStepIsWarmup) {
  std::vector<v1::Event> events = {Range(1, 1, 0, 100, "step 0"), Range(1, 1, 100, 300, "step 1"),
                                   Range(1, 1, 300, 400, "step 2"), Range(1, 1, 400, 1000, "step 3")};
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->steps.size(), 4u);
  EXPECT_EQ(a->measured_steps, 3u);
  EXPECT_FALSE(a->summary_includes_warmup);
  EXPECT_EQ(a->measured_wall_ns, 900u);
  EXPECT_DOUBLE_EQ(a->duration_ns.mean, 300.0);
  EXPECT_DOUBLE_EQ(a->duration_ns.p50, 200.0);
  // p95 of {100, 200, 600}: 200 + 0.9 * 400.
  EXPECT_DOUBLE_EQ(a->duration_ns.p95, 560.0);
  EXPECT_DOUBLE_EQ(a->duration_ns.min, 100.0);
  EXPECT_DOUBLE_EQ(a->duration_ns.max, 600.0);
  // No CUDA, no data ranges: every instant is "other" CPU time and GPU idle.
  EXPECT_EQ(a->measured_total.cpu.other_ns, 900u);
  EXPECT_EQ(a->measured_total.gpu.idle_ns, 900u);
  EXPECT_DOUBLE_EQ(a->stage_share[static_cast<size_t>(Stage::kOther)].mean, 1.0);

  StepOptions all_warmup;
  all_warmup.warmup_steps = 10;
  a = AnalyzeStepEvents(v1::TraceHeader(), events, all_warmup);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->summary_includes_warmup);
  EXPECT_EQ(a->measured_steps, 4u);
  EXPECT_EQ(a->measured_wall_ns, 1000u);
}

}  // namespace
}  // namespace gpuos
