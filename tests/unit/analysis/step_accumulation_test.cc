// Steps of CPU training loops through StepLocator on constructed event
// streams (the main thread's off-CPU intervals, gpuos-trace's backward
// uprobe marks, the Python hook's ranges): gradient accumulation of k = 2,
// 3, 4 micro-batches grouped into optimizer steps by the period of the CPU
// work between backward passes, with evaluation passes every 10 optimizer
// steps left out; no accumulation (one backward pass a step, evaluation
// left out); irregular work (not grouped, and why); a loop off the main
// thread (grouped by its own timeline); micro-batches counted per epoch,
// whose groups' phase moves at each epoch's end, and an evaluation at each
// epoch's end after a group (left out; the next step holds the restart);
// and the Python hook's
// optimizer.step and autograd.backward ranges with CPU evaluation passes
// inside their steps, left out.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "analysis/step_finder.h"
#include "analysis/step_options.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 9'000 * kMs;
constexpr uint32_t kPid = 8100;

StepPlan Locate(const std::vector<v1::Event>& events) {
  auto locator = StepLocator::Create(StepOptions());
  EXPECT_TRUE(locator.ok()) << locator.status();
  for (const v1::Event& e : events) (*locator)->Add(e);
  return (*locator)->Finish();
}

// A CPU training loop on thread `tid` of process kPid: per micro-batch a
// wait for data (blocked), a forward pass, loss.backward() (the uprobe's
// mark at its start; with `hook`, the Python hook's range around it), and
// after every k-th the optimizer's update (with `hook`, its
// optimizer.step range) and, every `eval_every` optimizer steps, an
// evaluation pass: forward work only.  CPU times jittered by +-`jitter`,
// random preemptions (not CPU work of the loop).
class CpuLoop {
 public:
  CpuLoop(uint32_t k, double jitter, uint32_t seed, uint32_t tid = kPid)
      : k_(k), tid_(tid), rng_(seed), noise_(1 - jitter, 1 + jitter) {}
  bool hook = false;
  size_t eval_every = 10;
  uint64_t update_ns = 2 * kMs;
  uint64_t eval_ns = 40 * kMs;

  void OptimizerStep() {
    for (uint32_t m = 0; m < k_; ++m) MicroBatch();
    Update();
  }
  // An epoch of `batches` micro-batches counted from 0 in it, an update
  // after every k-th and, with `step_at_end`, after the last (Lightning);
  // without, the last group's micro-batches go into the next epoch's first
  // step (`(i + 1) % k == 0` over enumerate(loader)).
  // An evaluation of `epoch_end_eval_ns` after the epoch's last update.
  void Epoch(size_t batches, bool step_at_end) {
    if (!backward_starts.empty()) ForkWorker();
    for (size_t i = 0; i < batches; ++i) {
      MicroBatch();
      if ((i + 1) % k_ == 0 || (step_at_end && i + 1 == batches)) Update();
    }
    Run(epoch_end_eval_ns);
  }
  uint64_t epoch_end_eval_ns = 0;
  std::vector<uint64_t> fork_times;
  // A new epoch's DataLoader forks a worker from the loop's thread.
  void ForkWorker() {
    fork_times.push_back(now_);
    v1::Event e = Base(now_);
    e.set_pid(kPid + 1000 + static_cast<uint32_t>(steps_));
    e.set_tid(e.pid());
    e.mutable_process_start()->set_ppid(kPid);
    e.mutable_process_start()->set_parent_tid(tid_);
    events.push_back(e);
    Run(kMs);
  }
  void MicroBatch() {
    Off(Jitter(1 * kMs), v1::OFF_CPU_CAUSE_FUTEX);  // waiting for the batch
    Run(Jitter(3 * kMs));                           // forward
    if (rng_() % 4 == 0) Off(Jitter(kMs / 2), v1::OFF_CPU_CAUSE_PREEMPTED);
    backward_starts.push_back(now_);
    const uint64_t backward = Jitter(4 * kMs);
    events.push_back(Mark(now_));
    if (hook) events.push_back(Range("autograd.backward", now_, backward));
    Run(backward);
  }
  void Update() {
    ++steps_;
    group_starts.push_back(backward_starts.size());
    const uint64_t update = Jitter(update_ns);
    if (hook) events.push_back(Range("optimizer.step", now_, update));
    Run(update);
    if (eval_every > 0 && steps_ % eval_every == 0) {
      eval_starts.push_back(now_);
      Run(Jitter(eval_ns));
    }
  }
  std::vector<v1::Event> events;
  std::vector<uint64_t> backward_starts;
  std::vector<size_t> group_starts;  // the backward pass after each update
  std::vector<uint64_t> eval_starts;

 private:
  uint64_t Jitter(uint64_t ns) { return static_cast<uint64_t>(static_cast<double>(ns) * noise_(rng_)); }
  void Run(uint64_t ns) { now_ += ns; }  // on the CPU
  void Off(uint64_t ns, v1::OffCpuCause cause) {
    v1::Event e = Base(now_);
    e.mutable_off_cpu()->set_duration_ns(ns);
    e.mutable_off_cpu()->set_cause(cause);
    e.mutable_off_cpu()->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
    e.mutable_off_cpu()->set_prev_state(cause != v1::OFF_CPU_CAUSE_PREEMPTED ? 1 : 0);
    e.mutable_off_cpu()->set_syscall_nr(cause == v1::OFF_CPU_CAUSE_FUTEX ? 202 : -1);
    events.push_back(e);
    now_ += ns;
  }
  v1::Event Base(uint64_t ts) const {
    v1::Event e;
    e.set_ts_ns(ts);
    e.set_pid(kPid);
    e.set_tid(tid_);
    return e;
  }
  v1::Event Mark(uint64_t ts) const {
    v1::Event e = Base(ts);
    e.mutable_nvtx_mark()->set_name(kDefaultBackwardRangeName);
    e.mutable_nvtx_mark()->set_domain(kBackwardUprobeDomain);
    return e;
  }
  v1::Event Range(const std::string& name, uint64_t ts, uint64_t duration) const {
    v1::Event e = Base(ts);
    e.mutable_nvtx_range()->set_name(name);
    e.mutable_nvtx_range()->set_domain("gpuos.python");
    e.mutable_nvtx_range()->set_duration_ns(duration);
    return e;
  }

  uint32_t k_;
  uint32_t tid_;
  std::mt19937 rng_;
  std::uniform_real_distribution<double> noise_;
  uint64_t now_ = kT0;
  size_t steps_ = 0;
};

bool HoldsEval(const StepWindow& w, const std::vector<uint64_t>& evals) {
  return std::any_of(evals.begin(), evals.end(), [&](uint64_t t) { return t >= w.start_ns && t < w.end_ns; });
}

void ExpectEvalStepsLeftOut(const StepPlan& plan, const std::vector<uint64_t>& evals) {
  size_t left_out = 0;
  for (size_t i = 1; i < plan.steps.size(); ++i) {
    const StepWindow& w = plan.steps[i];
    EXPECT_EQ(!w.left_out.empty(), HoldsEval(w, evals)) << "step " << i << ": " << w.left_out << "\n" << plan.note;
    left_out += !w.left_out.empty();
    if (!w.left_out.empty()) {
      EXPECT_TRUE(w.warmup);
      EXPECT_NE(w.left_out.find("extra CPU work"), std::string::npos) << w.left_out;
    }
  }
  EXPECT_GT(left_out, 0u);
  EXPECT_NE(plan.note.find("left out of the summaries"), std::string::npos) << plan.note;
}

TEST(StepAccumulationTest, BackwardPassesAreGroupedIntoOptimizerSteps) {
  for (uint32_t k : {2u, 3u, 4u}) {
    CpuLoop loop(k, 0.1, k);
    for (int s = 0; s < 40; ++s) loop.OptimizerStep();
    const StepPlan plan = Locate(loop.events);
    ASSERT_EQ(plan.source, StepSource::kBackwardGroups) << k << ": " << plan.note;
    EXPECT_STREQ(StepSourceName(plan.source), "backward_groups");
    EXPECT_TRUE(StepSourceIsInferred(plan.source));
    EXPECT_EQ(plan.pid, kPid);
    EXPECT_EQ(plan.tid, kPid);
    // Each step starts at the first backward pass of an optimizer step; the
    // last group has no next start to end at.
    ASSERT_EQ(plan.steps.size(), 39u) << k;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      EXPECT_EQ(plan.steps[i].start_ns, loop.backward_starts[i * k]) << k << " " << i;
      EXPECT_EQ(plan.steps[i].end_ns, loop.backward_starts[(i + 1) * k]) << k << " " << i;
    }
    EXPECT_NE(plan.note.find("groups of " + std::to_string(k) + " backward passes"), std::string::npos)
        << plan.note;
    ExpectEvalStepsLeftOut(plan, loop.eval_starts);
  }
}

TEST(StepAccumulationTest, OneBackwardPassAStepStaysOneStepWithItsEvaluationLeftOut) {
  CpuLoop loop(1, 0.1, 5);
  for (int s = 0; s < 60; ++s) loop.OptimizerStep();
  const StepPlan plan = Locate(loop.events);
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  EXPECT_EQ(plan.steps.size(), 59u);
  EXPECT_NE(plan.note.find("a step here is one micro-batch"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("no period of gradient accumulation"), std::string::npos) << plan.note;
  ExpectEvalStepsLeftOut(plan, loop.eval_starts);
}

TEST(StepAccumulationTest, IrregularWorkIsNotGrouped) {
  // An update lost in the jitter: one backward pass a step, and the note
  // says why they were not grouped.
  CpuLoop loop(3, 0.4, 7);
  loop.update_ns = kMs / 10;
  loop.eval_every = 0;
  for (int s = 0; s < 30; ++s) loop.OptimizerStep();
  const StepPlan plan = Locate(loop.events);
  ASSERT_EQ(plan.source, StepSource::kBackwardUprobe) << plan.note;
  EXPECT_EQ(plan.steps.size(), 89u);
  EXPECT_NE(plan.note.find("no k from 2 to 8"), std::string::npos) << plan.note;
}

TEST(StepAccumulationTest, ALoopOffTheMainThreadIsGroupedToo) {
  // Ray Train's session thread, a launcher that keeps the main thread for
  // signals: the loop thread's own timeline says how long it ran.
  CpuLoop loop(3, 0.1, 3, kPid + 5);
  for (int s = 0; s < 30; ++s) loop.OptimizerStep();
  const StepPlan plan = Locate(loop.events);
  ASSERT_EQ(plan.source, StepSource::kBackwardGroups) << plan.note;
  EXPECT_EQ(plan.tid, kPid + 5);
  ASSERT_EQ(plan.steps.size(), 29u);
  for (size_t i = 0; i < plan.steps.size(); ++i) EXPECT_EQ(plan.steps[i].start_ns, loop.backward_starts[3 * i]);
  ExpectEvalStepsLeftOut(plan, loop.eval_starts);
}

TEST(StepAccumulationTest, GroupsFollowAPhaseThatMovesAtEachEpochsEnd) {
  // Micro-batches counted per epoch, an epoch not a multiple of k: the last
  // group of each epoch is shorter (a step at the epoch's end) or carried
  // into the next epoch's first step.  Every step starts after an update;
  // where the group is carried, the new epoch's restart makes the carried
  // micro-batch's interval look like an update as much as the update's
  // (both hold extra CPU work), and the step may begin at the epoch's first
  // backward pass instead, one micro-batch late.
  for (const bool step_at_end : {true, false}) {
    for (const uint32_t k : {2u, 3u, 4u}) {
      CpuLoop loop(k, 0.1, 20 + k);
      loop.eval_every = 0;
      const size_t batches = k * 20 + 1;
      for (int epoch = 0; epoch < 4; ++epoch) loop.Epoch(batches, step_at_end);
      // The same loop with no fork seen (persistent workers, none): the
      // phase cannot move, and no k is found.
      std::vector<v1::Event> no_forks;
      std::copy_if(loop.events.begin(), loop.events.end(), std::back_inserter(no_forks),
                   [](const v1::Event& e) { return e.payload_case() != v1::Event::kProcessStart; });
      EXPECT_NE(Locate(no_forks).source, StepSource::kBackwardGroups) << k << " " << step_at_end;
      const StepPlan plan = Locate(loop.events);
      ASSERT_EQ(plan.source, StepSource::kBackwardGroups) << k << " " << step_at_end << ": " << plan.note;
      EXPECT_NE(plan.note.find("phase changing 3 times"), std::string::npos) << plan.note;
      std::vector<uint64_t> want = {loop.backward_starts[0]};
      for (size_t g : loop.group_starts) {
        if (g < loop.backward_starts.size()) want.push_back(loop.backward_starts[g]);
      }
      size_t late = 0;
      for (const StepWindow& w : plan.steps) {
        const size_t pass =
            std::find(loop.backward_starts.begin(), loop.backward_starts.end(), w.start_ns) - loop.backward_starts.begin();
        if (std::count(want.begin(), want.end(), w.start_ns) == 1) continue;
        if (!step_at_end && pass % batches == 0) {
          ++late;
          continue;
        }
        ADD_FAILURE() << k << " " << step_at_end << ": a step starts at backward pass " << pass;
      }
      EXPECT_LE(late, 3u);
      EXPECT_GE(plan.steps.size() + 2, want.size()) << k << " " << step_at_end;
      EXPECT_LE(plan.steps.size(), want.size() + late) << k << " " << step_at_end;
    }
  }
}

TEST(StepAccumulationTest, AnEpochsEndAfterAGroupIsLeftOutAndTheNextStepHoldsTheRestart) {
  // Lightning: 3 micro-batches a step, the epoch's last 2 a step of their
  // own, then a 40 ms evaluation, then the next epoch's workers start.
  CpuLoop loop(3, 0.1, 51);
  loop.eval_every = 0;
  loop.epoch_end_eval_ns = 40 * kMs;
  for (int epoch = 0; epoch < 4; ++epoch) loop.Epoch(62, true);
  const StepPlan plan = Locate(loop.events);
  ASSERT_EQ(plan.source, StepSource::kBackwardGroups) << plan.note;
  ASSERT_EQ(loop.fork_times.size(), 3u);
  for (uint64_t fork : loop.fork_times) {
    auto ends = std::find_if(plan.steps.begin(), plan.steps.end(), [&](const StepWindow& w) { return w.end_ns == fork; });
    ASSERT_NE(ends, plan.steps.end()) << "no step ends at the fork: " << plan.note;
    EXPECT_TRUE(ends->warmup);
    EXPECT_NE(ends->left_out.find("the end of an epoch"), std::string::npos) << ends->left_out;
    ASSERT_NE(ends + 1, plan.steps.end());
    EXPECT_EQ((ends + 1)->start_ns, fork);
    EXPECT_TRUE((ends + 1)->left_out.empty()) << (ends + 1)->left_out;
  }
  size_t left_out = 0;
  for (const StepWindow& w : plan.steps) left_out += !w.left_out.empty();
  EXPECT_EQ(left_out, 3u) << plan.note;
  EXPECT_NE(plan.note.find("3 groups held the end of an epoch"), std::string::npos) << plan.note;
}

TEST(StepAccumulationTest, CpuEvaluationInsideOptimizerStepsIsLeftOut) {
  // Launched with the Python hook: steps from optimizer.step ranges, each
  // holding 3 backward passes; an evaluation every 10 falls into a step.
  CpuLoop loop(3, 0.1, 11);
  loop.hook = true;
  for (int s = 0; s < 40; ++s) loop.OptimizerStep();
  const StepPlan plan = Locate(loop.events);
  ASSERT_EQ(plan.source, StepSource::kOptimizerSteps) << plan.note;
  EXPECT_EQ(plan.steps.size(), 39u);
  ExpectEvalStepsLeftOut(plan, loop.eval_starts);
}

TEST(StepAccumulationTest, CpuEvaluationInsideBackwardRangeStepsIsLeftOut) {
  // A hand-written update (no optimizer.step range): steps from the hook's
  // autograd.backward ranges; the epoch-end evaluation, 4 steps' CPU work
  // (3% of the run), falls into one.
  CpuLoop loop(1, 0.05, 13);
  loop.hook = true;
  loop.eval_every = 100;
  loop.eval_ns = 36 * kMs;
  std::vector<v1::Event> events;
  for (int s = 0; s < 130; ++s) loop.OptimizerStep();
  for (const v1::Event& e : loop.events) {
    if (!e.has_nvtx_range() || e.nvtx_range().name() != "optimizer.step") events.push_back(e);
  }
  const StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kBackwardRanges) << plan.note;
  EXPECT_EQ(plan.steps.size(), 129u);
  ExpectEvalStepsLeftOut(plan, loop.eval_starts);
}

}  // namespace
}  // namespace gpuos
