// Steps of unannotated traces (step_finder.h sources 3 and 4): the API
// rhythm rule on single names (api_rhythm.h), the anchor a constructed
// training loop's launching thread yields among decoys (a name twice a step
// with alternating spacing, per-kernel launches every 20 us, a regular call
// every 2 steps, a more regular call on another thread), the exact step
// windows, fixed windows when nothing is regular, NVTX still first, and the
// attach window clipping steps, read back through a real .gpuos file.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/api_rhythm.h"
#include "analysis/step_analysis.h"
#include "analysis/step_finder.h"
#include "gtest/gtest.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 5'000 * kMs;
constexpr uint32_t kPid = 4242;
constexpr uint32_t kOtherTid = 4250;

v1::Event Api(uint64_t start, uint64_t duration, const std::string& name, uint32_t tid = kPid) {
  v1::Event e;
  e.set_ts_ns(start);
  e.set_pid(kPid);
  e.set_tid(tid);
  e.mutable_cuda_api()->set_duration_ns(duration);
  e.mutable_cuda_api()->set_name(name);
  return e;
}

v1::Event Range(uint64_t start, uint64_t end, const std::string& name) {
  v1::Event e;
  e.set_ts_ns(start);
  e.set_pid(kPid);
  e.set_tid(kPid);
  e.mutable_nvtx_range()->set_duration_ns(end - start);
  e.mutable_nvtx_range()->set_name(name);
  return e;
}

v1::Event ThreadStart(uint64_t ts, uint32_t tid, const std::string& comm) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(kPid);
  e.set_tid(tid);
  e.mutable_thread_start()->set_comm(comm);
  e.mutable_thread_start()->set_preexisting(true);
  return e;
}

v1::Event OffCpu(uint64_t ts, uint64_t duration, uint32_t tid = kPid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(kPid);
  e.set_tid(tid);
  e.mutable_off_cpu()->set_duration_ns(duration);
  return e;
}

v1::TraceHeader AttachedHeader(uint64_t start_ns) {
  v1::TraceHeader h;
  h.add_command_line("python3");
  h.add_command_line("train.py");
  h.mutable_attach()->add_target_pids(kPid);
  h.mutable_attach()->set_start_ns(start_ns);
  return h;
}

v1::TraceTrailer AttachedTrailer(uint64_t end_ns) {
  v1::TraceTrailer t;
  t.set_attach_end_ns(end_ns);
  return t;
}

std::string TempPath() {
  char path[] = "/tmp/step_rhythm_test.XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  return path;
}

StepPlan Locate(const std::vector<v1::Event>& events, const v1::TraceHeader* header = nullptr,
                const v1::TraceTrailer* trailer = nullptr, const StepOptions& options = {}) {
  auto locator = StepLocator::Create(options);
  EXPECT_TRUE(locator.ok()) << locator.status();
  if (header != nullptr) (*locator)->SetHeader(*header);
  if (trailer != nullptr) (*locator)->SetTrailer(*trailer);
  for (const v1::Event& e : events) (*locator)->Add(e);
  return (*locator)->Finish();
}

// A training loop of `steps` steps of 50 ms +- 2.5 ms on thread kPid.  Each
// step: the batch in as two cudaMemcpyAsync (input, then label 40 us
// later), 150-250 kernel launches 20 us apart, one cudaStreamSynchronize (the
// loss, 2-4 ms of waiting); every 2nd step a cudaDeviceSynchronize too
// (regular as well: 20 calls, the pause its one excused interval).
// One 300 ms pause (an evaluation) after step 20.  Another thread polls
// cudaEventQuery every 10 ms exactly.  `sync_ends` receives the ends of the
// synchronize calls: the step boundaries the rhythm must find.
std::vector<v1::Event> TrainingLoop(uint64_t steps, std::vector<uint64_t>* sync_ends) {
  std::mt19937_64 random(7);
  std::uniform_int_distribution<int64_t> jitter(-2500 * static_cast<int64_t>(kUs), 2500 * static_cast<int64_t>(kUs));
  std::uniform_int_distribution<uint64_t> wait(2 * kMs, 4 * kMs);
  std::vector<v1::Event> events = {ThreadStart(kT0 - 10 * kMs, kPid, "python3"),
                                   ThreadStart(kT0 - 10 * kMs, kOtherTid, "poller")};
  uint64_t t = kT0;
  for (uint64_t i = 0; i < steps; ++i) {
    const uint64_t length = static_cast<uint64_t>(static_cast<int64_t>(50 * kMs) + jitter(random));
    events.push_back(Api(t, 15 * kUs, "cudaMemcpyAsync_v3020"));
    events.push_back(Api(t + 40 * kUs, 15 * kUs, "cudaMemcpyAsync_v3020"));
    // A data-dependent number of launches (sequences of varying length):
    // no repeating sequence, so the rhythm is what finds the steps.
    const uint64_t launches = 150 + random() % 101;
    for (uint64_t k = 0; k < launches; ++k) {
      events.push_back(Api(t + 100 * kUs + k * 20 * kUs, 5 * kUs, "cudaLaunchKernel_v7000"));
    }
    const uint64_t sync_wait = wait(random);
    const uint64_t sync_start = t + length - sync_wait - 100 * kUs;
    events.push_back(Api(sync_start, sync_wait, "cudaStreamSynchronize_v3020"));
    sync_ends->push_back(sync_start + sync_wait);
    if (i % 2 == 0) events.push_back(Api(sync_start + sync_wait + 10 * kUs, 20 * kUs, "cudaDeviceSynchronize_v3020"));
    t += length;
    if (i == 20) t += 300 * kMs;
  }
  for (uint64_t p = kT0; p < t; p += 10 * kMs) events.push_back(Api(p, 2 * kUs, "cudaEventQuery_v3020", kOtherTid));
  for (uint64_t k = 0; k < 10; ++k) events.push_back(Api(kT0 + k * kMs, 5 * kUs, "cudaLaunchKernel_v7000", kOtherTid));
  // Records arrive out of order (CUPTI buffers): the finder must not care.
  std::shuffle(events.begin() + 2, events.end(), random);
  return events;
}

// ---- The rule on one name ---------------------------------------------------

TEST(ApiRhythmRuleTest, JitteredOncePerStepIsRegular) {
  std::vector<uint64_t> ends;
  std::mt19937_64 random(1);
  std::uniform_int_distribution<uint64_t> length(90 * kMs, 110 * kMs);  // +-10%: CV about 0.06
  uint64_t t = kT0;
  for (int i = 0; i < 30; ++i) ends.push_back(t += length(random));
  RhythmCandidate c = MeasureRhythm("cuStreamSynchronize", ends, StepOptions());
  EXPECT_TRUE(c.regular()) << c.why_not;
  EXPECT_EQ(c.calls, 30u);
  EXPECT_EQ(c.intervals, 29u);
  EXPECT_EQ(c.excused, 2u);  // floor(10% of 29)
  EXPECT_GT(c.mean_interval_ns, 90.0 * kMs);
  EXPECT_LT(c.mean_interval_ns, 110.0 * kMs);
  EXPECT_LT(c.cv, 0.1);
}

TEST(ApiRhythmRuleTest, TwiceAStepWithAlternatingSpacingIsIrregular) {
  std::vector<uint64_t> ends;
  for (uint64_t i = 0; i < 40; ++i) {
    ends.push_back(kT0 + i * 100 * kMs);
    ends.push_back(kT0 + i * 100 * kMs + 40 * kUs);
  }
  RhythmCandidate c = MeasureRhythm("cuMemcpyHtoDAsync", ends, StepOptions());
  EXPECT_EQ(c.verdict, RhythmVerdict::kIrregular);
  EXPECT_GT(c.cv, 0.8);
  EXPECT_NE(c.why_not.find("CV "), std::string::npos) << c.why_not;
}

TEST(ApiRhythmRuleTest, PerKernelSpacingIsTooDense) {
  std::vector<uint64_t> ends;
  for (uint64_t i = 0; i < 500; ++i) ends.push_back(kT0 + i * 20 * kUs);
  RhythmCandidate c = MeasureRhythm("cuLaunchKernel", ends, StepOptions());
  EXPECT_EQ(c.verdict, RhythmVerdict::kTooDense);
  EXPECT_LT(c.cv, 0.01);  // perfectly regular, and still not a step
  EXPECT_NE(c.why_not.find("0.020 ms < 1.000 ms"), std::string::npos) << c.why_not;
}

TEST(ApiRhythmRuleTest, TooFewCallsAndPausesAreExcusedOnlyUpToTheFraction) {
  RhythmCandidate few = MeasureRhythm("x", {kT0, kT0 + 100 * kMs, kT0 + 200 * kMs, kT0 + 300 * kMs}, StepOptions());
  EXPECT_EQ(few.verdict, RhythmVerdict::kTooFewCalls);
  EXPECT_EQ(few.why_not, "4 calls < 5");

  // 20 intervals of 100 ms; two of them 600 ms pauses: 10% (2) excused.
  std::vector<uint64_t> ends = {kT0};
  for (int i = 0; i < 20; ++i) ends.push_back(ends.back() + (i == 5 || i == 12 ? 600 : 100) * kMs);
  RhythmCandidate paused = MeasureRhythm("x", ends, StepOptions());
  EXPECT_TRUE(paused.regular()) << paused.why_not;
  EXPECT_EQ(paused.excused, 2u);
  EXPECT_DOUBLE_EQ(paused.mean_interval_ns, 100.0 * kMs);
  EXPECT_DOUBLE_EQ(paused.cv, 0.0);

  // A third pause is one too many.
  ends = {kT0};
  for (int i = 0; i < 20; ++i) ends.push_back(ends.back() + (i == 5 || i == 12 || i == 15 ? 600 : 100) * kMs);
  EXPECT_EQ(MeasureRhythm("x", ends, StepOptions()).verdict, RhythmVerdict::kIrregular);
}

TEST(ApiRhythmRuleTest, ChoiceStripsSuffixesPrefersFrequentThenSyncAndDropsDenseTimes) {
  ApiRhythm rhythm{StepOptions()};
  for (uint64_t i = 0; i < 20; ++i) {
    const uint64_t t = kT0 + i * 100 * kMs;
    // Same count, same spacing: the synchronize wins over the copy.
    rhythm.Add(i % 2 ? "cuMemcpyDtoHAsync_v2" : "cuMemcpyDtoHAsync", t + 5 * kMs);
    rhythm.Add("cuStreamSynchronize", t + 10 * kMs);
    if (i % 4 == 0) rhythm.Add("cuCtxSynchronize", t + 11 * kMs);  // regular, every 4 steps
  }
  for (uint64_t k = 0; k < 10000; ++k) rhythm.Add("cuLaunchKernel", kT0 + k * 20 * kUs);
  RhythmChoice choice = rhythm.Choose();
  ASSERT_TRUE(choice.found());
  EXPECT_EQ(choice.anchor().name, "cuStreamSynchronize");
  ASSERT_EQ(choice.anchor().times.size(), 20u);
  EXPECT_EQ(choice.anchor().times[0], kT0 + 10 * kMs);
  ASSERT_EQ(choice.candidates.size(), 4u);
  EXPECT_EQ(choice.candidates[1].name, "cuMemcpyDtoHAsync");  // one name, 20 calls
  EXPECT_EQ(choice.candidates[1].calls, 20u);
  EXPECT_TRUE(choice.candidates[1].times.empty());  // only the anchor keeps times
  EXPECT_EQ(choice.candidates[2].name, "cuCtxSynchronize");
  EXPECT_TRUE(choice.candidates[2].regular());
  EXPECT_EQ(choice.candidates[3].name, "cuLaunchKernel");
  EXPECT_EQ(choice.candidates[3].calls, 10000u);
  EXPECT_EQ(choice.candidates[3].verdict, RhythmVerdict::kTooDense);
}

// ---- Step finding -----------------------------------------------------------

TEST(StepRhythmTest, PicksTheOncePerStepSyncAndReturnsItsWindows) {
  std::vector<uint64_t> sync_ends;
  std::vector<v1::Event> events = TrainingLoop(40, &sync_ends);
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kApiRhythm) << plan.note;
  EXPECT_EQ(plan.anchor_name, "cudaStreamSynchronize");
  EXPECT_EQ(plan.pid, kPid);
  EXPECT_EQ(plan.tid, kPid);  // not the poller, whose rhythm is more regular
  EXPECT_EQ(plan.thread_comm, "python3");
  ASSERT_EQ(plan.steps.size(), sync_ends.size() - 1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    EXPECT_EQ(plan.steps[i].start_ns, sync_ends[i]) << i;
    EXPECT_EQ(plan.steps[i].end_ns, sync_ends[i + 1]) << i;
    EXPECT_EQ(plan.steps[i].index, i);
    EXPECT_EQ(plan.steps[i].warmup, i == 0);
  }
  EXPECT_NE(plan.note.find("cudaStreamSynchronize call to the next on thread 4242 \"python3\""), std::string::npos)
      << plan.note;
  // The note's numbers, computed here the long way: the 3 longest of 39
  // intervals set aside, mean and CV of the other 36.
  std::vector<double> intervals;
  for (size_t i = 1; i < sync_ends.size(); ++i) intervals.push_back(static_cast<double>(sync_ends[i] - sync_ends[i - 1]));
  std::sort(intervals.begin(), intervals.end());
  intervals.resize(intervals.size() - 3);
  double mean = 0, var = 0;
  for (double v : intervals) mean += v / intervals.size();
  for (double v : intervals) var += (v - mean) * (v - mean) / intervals.size();
  EXPECT_NE(plan.note.find(absl::StrFormat("40 calls, one every %.3f ms on average, CV of the intervals %.3f", mean / 1e6,
                                           std::sqrt(var) / mean)),
            std::string::npos)
      << plan.note;
  EXPECT_NE(plan.note.find("the 3 longest of 39 intervals set aside"), std::string::npos) << plan.note;

  // The decoys are what they claim: a second regular name, half as
  // frequent; the copies irregular; the launches too dense.
  ApiRhythm main_thread{StepOptions()};
  for (const v1::Event& e : events) {
    if (e.has_cuda_api() && e.tid() == kPid) main_thread.Add(e.cuda_api().name(), e.ts_ns() + e.cuda_api().duration_ns());
  }
  RhythmChoice choice = main_thread.Choose();
  ASSERT_EQ(choice.candidates.size(), 4u);
  EXPECT_EQ(choice.candidates[1].name, "cudaDeviceSynchronize");
  EXPECT_TRUE(choice.candidates[1].regular());
  EXPECT_EQ(choice.candidates[1].calls, 20u);
  EXPECT_EQ(choice.candidates[2].name, "cudaLaunchKernel");
  EXPECT_EQ(choice.candidates[2].verdict, RhythmVerdict::kTooDense);
  EXPECT_EQ(choice.candidates[3].name, "cudaMemcpyAsync");
  EXPECT_EQ(choice.candidates[3].verdict, RhythmVerdict::kIrregular);

  // The whole analysis agrees, and the report's fields say the same.
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->source, StepSource::kApiRhythm);
  EXPECT_EQ(a->anchor_name, "cudaStreamSynchronize");
  EXPECT_EQ(a->steps.size(), 39u);
  EXPECT_EQ(a->note, plan.note);
  EXPECT_STREQ(StepSourceName(a->source), "cuda_api_rhythm");
}

TEST(StepRhythmTest, WithoutTheSyncTheCopiesAndLaunchesAreNotChosen) {
  std::vector<uint64_t> sync_ends;
  std::vector<v1::Event> events;
  for (const v1::Event& e : TrainingLoop(40, &sync_ends)) {
    const std::string& name = e.cuda_api().name();
    if (name.rfind("cudaStreamSynchronize", 0) == 0 || name.rfind("cudaDeviceSynchronize", 0) == 0) continue;
    events.push_back(e);
  }
  StepPlan plan = Locate(events);
  // A launch trace with CUDA calls and no regular name: fixed windows.
  ASSERT_EQ(plan.source, StepSource::kFixedWindows) << plan.note;
  EXPECT_EQ(plan.tid, kPid);
  EXPECT_NE(plan.note.find("no CUDA API call of thread 4242 \"python3\", the launching thread"), std::string::npos)
      << plan.note;
  EXPECT_NE(plan.note.find("the closest: cudaMemcpyAsync, 80 calls, CV"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("over the trace"), std::string::npos) << plan.note;
}

TEST(StepRhythmTest, FixedWindowsOverTheAttachWindowWhenNothingIsRegular) {
  const uint64_t start = kT0;
  const uint64_t end = kT0 + 1050 * kMs;
  std::vector<v1::Event> events = {ThreadStart(start, kPid, "python3")};
  // Irregular syncs: 1, 2, 4, 8... ms apart.
  uint64_t t = start + 1 * kMs;
  for (uint64_t gap = 1; t < end; gap *= 2, t += gap * kMs) events.push_back(Api(t, 10 * kUs, "cuStreamSynchronize"));
  // Launches 0.1 and 2 ms apart in turn: one name over and over, at no
  // steady interval, is no repeating sequence either.
  for (uint64_t k = 0, at = start; k < 50; ++k, at += k % 2 ? 100 * kUs : 2 * kMs) {
    events.push_back(Api(at, 5 * kUs, "cuLaunchKernel"));
  }
  const v1::TraceHeader header = AttachedHeader(start);
  const v1::TraceTrailer trailer = AttachedTrailer(end);
  StepPlan plan = Locate(events, &header, &trailer);
  ASSERT_EQ(plan.source, StepSource::kFixedWindows) << plan.note;
  EXPECT_STREQ(StepSourceName(plan.source), "fixed_windows");
  ASSERT_EQ(plan.steps.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(plan.steps[i].start_ns, start + i * 100 * kMs) << i;
    EXPECT_EQ(plan.steps[i].end_ns, start + (i + 1) * 100 * kMs) << i;
  }
  EXPECT_NE(plan.note.find("fixed windows of 100.000 ms over the attach window"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("the last 50.000 ms, shorter than a window, left out"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("the closest: cuStreamSynchronize"), std::string::npos) << plan.note;

  // The window width is an option.
  StepOptions options;
  options.fixed_window_ns = 350 * kMs;
  plan = Locate(events, &header, &trailer, options);
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[2].end_ns, end);
}

TEST(StepRhythmTest, AttachedWithoutCudaWindowsTheFirstTargetsMainThread) {
  const uint64_t start = kT0;
  std::vector<v1::Event> events = {ThreadStart(start, kPid, "python3"), ThreadStart(start, kOtherTid, "worker"),
                                   OffCpu(start + 10 * kMs, 5 * kMs, kOtherTid), OffCpu(start + 250 * kMs, kMs)};
  const v1::TraceHeader header = AttachedHeader(start);
  // No trailer (the recording was killed): the last event ends the window.
  StepPlan plan = Locate(events, &header);
  ASSERT_EQ(plan.source, StepSource::kFixedWindows) << plan.note;
  EXPECT_EQ(plan.pid, kPid);
  EXPECT_EQ(plan.tid, kPid);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[1].end_ns, start + 200 * kMs);
  EXPECT_NE(plan.note.find("no CUDA API calls; the windows are on pid 4242's main thread"), std::string::npos)
      << plan.note;

  // Shorter than one window: the whole window is one step.
  plan = Locate({ThreadStart(start, kPid, "python3"), OffCpu(start + 30 * kMs, kMs)}, &header);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].start_ns, start);
  EXPECT_EQ(plan.steps[0].end_ns, start + 30 * kMs);
}

TEST(StepRhythmTest, LaunchedTraceWithoutCudaKeepsTodaysNote) {
  StepPlan plan = Locate({ThreadStart(kT0, kPid, "python3"), OffCpu(kT0 + 10 * kMs, kMs),
                          OffCpu(kT0 + 900 * kMs, kMs)});
  EXPECT_EQ(plan.source, StepSource::kNone);
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_NE(plan.note.find("no NVTX range is named like a training step"), std::string::npos) << plan.note;
  EXPECT_NE(plan.note.find("annotate each step"), std::string::npos) << plan.note;
}

TEST(StepRhythmTest, NvtxStillWinsAndIsClippedToTheAttachWindow) {
  std::vector<uint64_t> sync_ends;
  std::vector<v1::Event> events = TrainingLoop(40, &sync_ends);
  // Three NVTX steps; the first began before the attach, the last runs
  // past its end.
  const uint64_t start = kT0 + 100 * kMs;
  const uint64_t end = kT0 + 400 * kMs;
  events.push_back(Range(kT0, kT0 + 150 * kMs, "step 7"));
  events.push_back(Range(kT0 + 150 * kMs, kT0 + 300 * kMs, "step 8"));
  events.push_back(Range(kT0 + 300 * kMs, kT0 + 450 * kMs, "step 9"));
  events.push_back(Range(kT0 + 450 * kMs, kT0 + 500 * kMs, "step 10"));  // after the end: dropped
  StepPlan plan = Locate(events);
  ASSERT_EQ(plan.source, StepSource::kNvtxRanges);
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_TRUE(plan.anchor_name.empty());

  const v1::TraceHeader header = AttachedHeader(start);
  const v1::TraceTrailer trailer = AttachedTrailer(end);
  plan = Locate(events, &header, &trailer);
  ASSERT_EQ(plan.source, StepSource::kNvtxRanges);
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].start_ns, start);
  EXPECT_EQ(plan.steps[0].end_ns, kT0 + 150 * kMs);
  EXPECT_EQ(plan.steps[0].index, 7u);
  EXPECT_EQ(plan.steps[2].start_ns, kT0 + 300 * kMs);
  EXPECT_EQ(plan.steps[2].end_ns, end);
  EXPECT_TRUE(plan.steps[0].warmup);
  EXPECT_FALSE(plan.steps[1].warmup);
}

// Through a real file: the trailer's attach end reaches the finder, and the
// rhythm's steps are cut to the window.
TEST(StepRhythmTest, AnalyzeStepsReadsTheAttachWindowFromTheFile) {
  std::string path = TempPath();
  std::vector<uint64_t> sync_ends;
  std::vector<v1::Event> events = TrainingLoop(40, &sync_ends);
  // The window ends in the middle of step 30's interval.
  const uint64_t end = sync_ends[30] + 10 * kMs;
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteHeader(AttachedHeader(kT0 - 20 * kMs)).ok());
    for (const v1::Event& e : events) {
      if (e.ts_ns() + e.cuda_api().duration_ns() <= end) {
        ASSERT_TRUE((*writer)->Append(e).ok());
      }
    }
    // Events written after the window (a late flush) do not stretch it.
    ASSERT_TRUE((*writer)->Append(OffCpu(end + 500 * kMs, kMs)).ok());
    ASSERT_TRUE((*writer)->WriteTrailer(AttachedTrailer(end)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto a = AnalyzeSteps(path, StepOptions());
  unlink(path.c_str());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->source, StepSource::kApiRhythm) << a->note;
  ASSERT_EQ(a->steps.size(), 30u);
  EXPECT_EQ(a->steps.front().start_ns, sync_ends[0]);
  EXPECT_EQ(a->steps.back().end_ns, sync_ends[30]);

  // With the syncs gone, fixed windows run to the trailer's end, not to the
  // late event.
  events.erase(std::remove_if(events.begin(), events.end(),
                              [](const v1::Event& e) { return e.cuda_api().name().find("Synchronize") != std::string::npos; }),
               events.end());
  path = TempPath();
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteHeader(AttachedHeader(kT0)).ok());
    for (const v1::Event& e : events) ASSERT_TRUE((*writer)->Append(e).ok());
    ASSERT_TRUE((*writer)->Append(OffCpu(kT0 + 5000 * kMs, kMs)).ok());
    ASSERT_TRUE((*writer)->WriteTrailer(AttachedTrailer(kT0 + 1000 * kMs)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  a = AnalyzeSteps(path, StepOptions());
  unlink(path.c_str());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->source, StepSource::kFixedWindows) << a->note;
  ASSERT_EQ(a->steps.size(), 10u);
  EXPECT_EQ(a->steps.back().end_ns, kT0 + 1000 * kMs);
}

}  // namespace
}  // namespace gpuos
