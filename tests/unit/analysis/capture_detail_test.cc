// Capture windows in the analysis (analysis/capture_detail.h): a
// constructed trace whose kernels were recorded only inside a window, as
// the shim records them with --capture; the GPU side of the summaries must
// come from the steps inside it, and the report must say which steps those
// were.
#include "analysis/capture_detail.h"

#include <sstream>
#include <string>
#include <vector>

#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "export/report/html_report.h"
#include "export/report/json_writer.h"
#include "export/report/step_columns.h"
#include "export/report/step_report.h"
#include "analysis/diagnosis.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint32_t kPid = 42;
constexpr uint64_t kT0 = 10000, kStep = 1000;

v1::Event Ev(uint64_t ts, uint32_t tid = kPid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(kPid);
  e.set_tid(tid);
  return e;
}

v1::Event Range(uint64_t start, uint64_t end, const std::string& name) {
  v1::Event e = Ev(start);
  e.mutable_nvtx_range()->set_duration_ns(end - start);
  e.mutable_nvtx_range()->set_name(name);
  return e;
}

v1::Event Edge(uint64_t ts, bool open, int64_t step) {
  v1::Event e = Ev(ts);
  e.mutable_capture_window()->set_edge(open ? v1::CaptureWindow::OPEN : v1::CaptureWindow::CLOSE);
  e.mutable_capture_window()->set_step(step);
  e.mutable_capture_window()->set_reason("steps=10..14");
  return e;
}

// 30 steps of 1000 ns: a data fetch of 300 ns, a launch of 20, then a
// kernel to the end of the step -- whose records exist only for steps
// first..last when `window` (as CUPTI's, switched on only there).
std::vector<v1::Event> Steps(bool window, uint64_t first = 10, uint64_t last = 14) {
  std::vector<v1::Event> events;
  for (uint64_t i = 0; i < 30; ++i) {
    const uint64_t t = kT0 + i * kStep;
    if (window && i == first) events.push_back(Edge(t, true, static_cast<int64_t>(i)));
    events.push_back(Range(t, t + kStep, "step " + std::to_string(i)));
    events.push_back(Range(t, t + 300, "get batch"));
    v1::Event api = Ev(t + 300);
    api.mutable_cuda_api()->set_duration_ns(20);
    api.mutable_cuda_api()->set_name("cudaLaunchKernel_v7000");
    events.push_back(api);
    if (!window || (i >= first && i <= last)) {
      v1::Event kernel = Ev(t + 320, 0);
      kernel.mutable_gpu_kernel()->set_duration_ns(kStep - 320);
      kernel.mutable_gpu_kernel()->set_stream(7);
      events.push_back(kernel);
    }
    if (window && i == last) events.push_back(Edge(t + kStep, false, static_cast<int64_t>(i)));
  }
  return events;
}

StepAnalysis Analyze(const std::vector<v1::Event>& events, const std::string& spec) {
  v1::TraceHeader header;
  header.set_capture_spec(spec);
  auto a = AnalyzeStepEvents(header, events, StepOptions());
  EXPECT_TRUE(a.ok()) << a.status();
  return *a;
}

// The text report of `a` with its own diagnosis, `max_steps` rows of steps.
std::string TextReport(const StepAnalysis& a, size_t max_steps = 5) {
  std::ostringstream text;
  WriteStepTextReport(a, Diagnose(a), text, max_steps);
  return text.str();
}

TEST(CaptureDetail, GpuPartsComeFromTheStepsInsideTheWindow) {
  StepAnalysis a = Analyze(Steps(true), "steps=10..14");
  ASSERT_EQ(a.steps.size(), 30u);
  for (const StepRecord& s : a.steps) {
    EXPECT_EQ(s.cuda_detail, s.index >= 10 && s.index <= 14) << s.index;
  }
  // Summaries over the five steps with detail; the 24 other measured ones
  // (step 0 is warmup) are counted apart, with their wall time.
  EXPECT_EQ(a.measured_steps, 5u);
  EXPECT_EQ(a.steps_without_detail, 24u);
  EXPECT_EQ(a.all_steps_duration_ns.count, 29u);
  EXPECT_EQ(a.measured_wall_ns, 5 * kStep);
  // GPU idle: the fetch and the launch of each detail step (320 ns), not
  // the whole of the steps whose kernels were never recorded.
  EXPECT_EQ(a.measured_total.gpu.idle_ns, 5 * 320u);
  EXPECT_EQ(a.measured_total.gpu.kernels_started, 5u);
  // CPU side of every step still there.
  EXPECT_EQ(a.steps[20].cpu.data_wait_ns, 300u);
  EXPECT_EQ(a.steps[20].cpu.launch_api_ns, 20u);

  ASSERT_EQ(a.capture.windows.size(), 1u);
  const CaptureWindowSpan& w = a.capture.windows[0];
  EXPECT_EQ(w.first_step, 10);
  EXPECT_EQ(w.last_step, 14);
  EXPECT_EQ(w.start_ns, kT0 + 10 * kStep);
  EXPECT_EQ(w.end_ns, kT0 + 15 * kStep);
  EXPECT_EQ(a.capture.spec, "steps=10..14");
}

// The OPEN edges of `events` marked as having subscribed CUPTI again, as
// the shim marks a window after CUPTI was taken out of the process.
std::vector<v1::Event> Resubscribed(std::vector<v1::Event> events) {
  for (v1::Event& e : events) {
    if (e.has_capture_window() && e.capture_window().edge() == v1::CaptureWindow::OPEN) {
      e.mutable_capture_window()->set_cupti_subscribed(true);
    }
  }
  return events;
}

TEST(CaptureDetail, AWindowsFirstStepThatPaidForSubscribingCuptiIsLeftOutOfTheGpuSide) {
  StepAnalysis a = Analyze(Resubscribed(Steps(true)), "steps=10..14");
  ASSERT_EQ(a.steps.size(), 30u);
  for (const StepRecord& s : a.steps) {
    EXPECT_EQ(s.cuda_detail, s.index >= 10 && s.index <= 14) << s.index;
    EXPECT_EQ(s.window_start, s.index == 10) << s.index;
    EXPECT_EQ(a.InSummaries(s), s.index >= 11 && s.index <= 14) << s.index;
  }
  EXPECT_EQ(a.measured_steps, 4u);
  EXPECT_EQ(a.window_start_steps, 1u);
  EXPECT_EQ(a.steps_without_detail, 24u);
  EXPECT_EQ(a.all_steps, 29u);  // the OS side keeps every step
  EXPECT_EQ(a.measured_total.gpu.idle_ns, 4 * 320u);
  ASSERT_EQ(a.capture.windows.size(), 1u);
  EXPECT_TRUE(a.capture.windows[0].cupti_subscribed);
  EXPECT_EQ(a.capture.windows[0].first_step, 10);

  const std::string text = TextReport(a, 30);
  EXPECT_NE(text.find("over the 4 steps with CUDA detail; the first step of 1 window left out: it paid for "
                      "subscribing CUPTI again"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("is over 4 of them; the first step of 1 window left out: it paid for subscribing CUPTI "
                      "again; step time and OS costs over all 29"),
            std::string::npos)
      << text;
  // The step table marks step 10, and its GPU columns' mean is over steps
  // 11..14 only.
  EXPECT_NE(text.find("   10+  "), std::string::npos) << text;
  EXPECT_EQ(text.find("   11+  "), std::string::npos) << text;
  for (const StepColumn& c : StepColumns()) {
    EXPECT_EQ(InColumnStats(c, a.steps[10]), !c.needs_detail) << c.title;
    EXPECT_TRUE(InColumnStats(c, a.steps[11])) << c.title;
  }

  // A window of one step keeps it: there is nothing else to measure.
  StepAnalysis one = Analyze(Resubscribed(Steps(true, 10, 10)), "steps=10..10");
  EXPECT_EQ(one.measured_steps, 1u);
  EXPECT_EQ(one.window_start_steps, 0u);
  // Without the mark (CUPTI stayed subscribed between windows) every step
  // of the window counts.
  EXPECT_EQ(Analyze(Steps(true), "steps=10..14").window_start_steps, 0u);
}

TEST(CaptureDetail, ReportsSayHowMuchSlowerTheStepsWithDetailRan) {
  StepAnalysis a = Analyze(Steps(true), "steps=10..14");
  EXPECT_EQ(DetailStepsSlowdown(a), 0.0);  // the constructed steps are all alike
  const std::string same = TextReport(a);
  EXPECT_EQ(same.find("took"), std::string::npos) << same;
  // Steps inside windows at 1.5x the others' median, as CUPTI's records
  // slow a short loop.
  a.duration_ns.p50 = 1.5 * a.all_steps_duration_ns.p50;
  EXPECT_DOUBLE_EQ(DetailStepsSlowdown(a), 0.5);
  const std::string text = TextReport(a);
  EXPECT_NE(text.find("the steps with CUDA detail took 50.0% longer than the job's steps (p50 0.002 ms "
                      "against 0.001 ms)"),
            std::string::npos)
      << text;
  // Without windows there is nothing to compare.
  EXPECT_EQ(DetailStepsSlowdown(Analyze(Steps(false), "")), 0.0);
}

TEST(CaptureDetail, WithoutASpecEveryStepHasDetail) {
  StepAnalysis a = Analyze(Steps(false), "");
  EXPECT_FALSE(a.capture.in_use());
  for (const StepRecord& s : a.steps) EXPECT_TRUE(s.cuda_detail);
  EXPECT_EQ(a.measured_steps, 29u);
  EXPECT_EQ(a.steps_without_detail, 0u);
  EXPECT_EQ(a.measured_total.gpu.idle_ns, 29 * 320u);
}

TEST(CaptureDetail, AWindowStillOpenAtTheEndRunsToTheLastEvent) {
  std::vector<v1::Event> events = Steps(true, 25, 40);  // never closed
  StepAnalysis a = Analyze(events, "steps=25..40");
  ASSERT_EQ(a.capture.windows.size(), 1u);
  EXPECT_FALSE(a.capture.windows[0].closed);
  EXPECT_EQ(a.capture.windows[0].first_step, 25);
  EXPECT_EQ(a.capture.windows[0].last_step, 29);
  EXPECT_EQ(a.measured_steps, 5u);
}

TEST(CaptureDetail, AStepSpecWithNoWindowInAJobWithoutStepMarksSaysWhy) {
  // The steps come from the kernel sequence, not from marks the shim sees:
  // steps=10..14 never opened a window.
  std::vector<v1::Event> events;
  for (const v1::Event& e : Steps(false)) {
    if (!e.has_nvtx_range()) events.push_back(e);
  }
  StepAnalysis a = Analyze(events, "steps=10..14");
  ASSERT_TRUE(a.has_steps());
  EXPECT_NE(a.capture.note.find("no window opened: steps=10..14 counts the steps the job marks"), std::string::npos)
      << a.capture.note;
  const std::string text = TextReport(a);
  EXPECT_NE(text.find("every=10s,steps=K or after=60s,for=10s open windows by time there"), std::string::npos)
      << text;
  // Marked steps, a time spec, or a window that opened: nothing to say.
  EXPECT_TRUE(Analyze(Steps(false), "steps=10..14").capture.note.empty());
  EXPECT_TRUE(Analyze(events, "every=10s,steps=2").capture.note.empty());
  EXPECT_TRUE(Analyze(events, "after=1s,for=1s").capture.note.empty());
  EXPECT_FALSE(Analyze(events, "every=200, steps=2").capture.note.empty());
  EXPECT_TRUE(Analyze(Steps(true), "steps=10..14").capture.note.empty());
}

// The shim's marks where it counted steps from the rhythm of the job's
// CUDA calls (a job with no step marks): one at each step's end, named
// after the call, on the loop's thread.
v1::Event RhythmMark(uint64_t ts) {
  v1::Event e = Ev(ts);
  e.mutable_nvtx_mark()->set_domain(kLiveRhythmDomain);
  e.mutable_nvtx_mark()->set_name("cuStreamSynchronize");
  return e;
}

TEST(CaptureDetail, StepsCountedLiveFromTheCallsRhythmAreTheReportsSteps) {
  // No step ranges: the steps are the marks', and the window the shim
  // opened on them covers exactly steps 10..14, whatever the kernel
  // records (inside the window only) would suggest.
  std::vector<v1::Event> events;
  for (const v1::Event& e : Steps(true)) {
    if (!e.has_nvtx_range()) events.push_back(e);
  }
  for (uint64_t i = 0; i <= 30; ++i) events.push_back(RhythmMark(kT0 + i * kStep));
  StepAnalysis a = Analyze(events, "steps=10..14");
  ASSERT_EQ(a.steps.size(), 30u);
  EXPECT_EQ(a.source, StepSource::kApiRhythm);
  EXPECT_NE(a.note.find("counted live in the job by the shim"), std::string::npos) << a.note;
  for (const StepRecord& s : a.steps) {
    EXPECT_EQ(s.start_ns, kT0 + s.index * kStep);
    EXPECT_EQ(s.cuda_detail, s.index >= 10 && s.index <= 14) << s.index;
  }
  ASSERT_EQ(a.capture.windows.size(), 1u);
  EXPECT_EQ(a.capture.windows[0].first_step, 10);
  EXPECT_EQ(a.capture.windows[0].last_step, 14);
  EXPECT_TRUE(a.capture.note.empty()) << a.capture.note;

  // The marks came, but only after the asked steps (the count is known from
  // the 17th step on): the note says so.
  std::vector<v1::Event> late;
  for (const v1::Event& e : events) {
    if (!e.has_capture_window()) late.push_back(e);
  }
  StepAnalysis b = Analyze(late, "steps=10..14");
  EXPECT_NE(b.capture.note.find("had passed before the shim knew the steps"), std::string::npos) << b.capture.note;
}

TEST(CaptureDetail, ReportsSayWhichStepsHaveDetail) {
  StepAnalysis a = Analyze(Steps(true), "steps=10..14");
  Diagnosis d = Diagnose(a);
  std::ostringstream json_text;
  JsonWriter json(json_text);
  json.BeginObject();
  WriteStepJsonMembers(a, d, json);
  json.EndObject();
  google::protobuf::Struct j;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json_text.str(), &j).ok()) << json_text.str();
  const google::protobuf::Struct& capture = j.fields().at("capture").struct_value();
  EXPECT_EQ(capture.fields().at("spec").string_value(), "steps=10..14");
  const auto& windows = capture.fields().at("windows").list_value();
  ASSERT_EQ(windows.values_size(), 1);
  const google::protobuf::Struct& w = windows.values(0).struct_value();
  EXPECT_EQ(w.fields().at("first_step").number_value(), 10);
  EXPECT_EQ(w.fields().at("last_step").number_value(), 14);
  EXPECT_EQ(w.fields().at("start_ns").number_value(), 20000);
  EXPECT_EQ(w.fields().at("end_ns").number_value(), 25000);
  const auto& steps = j.fields().at("steps").list_value();
  ASSERT_EQ(steps.values_size(), 30);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(steps.values(i).struct_value().fields().at("cuda_detail").bool_value(), i >= 10 && i <= 14) << i;
  }
  const google::protobuf::Struct& summary = j.fields().at("step_analysis").struct_value();
  EXPECT_EQ(summary.fields().at("cuda_detail_steps").number_value(), 5);
  EXPECT_EQ(summary.fields().at("steps_without_cuda_detail").number_value(), 24);
  EXPECT_EQ(summary.fields().at("measured_steps").number_value(), 5);
  std::ostringstream text;
  WriteStepTextReport(a, d, text, 5);
  EXPECT_NE(text.str().find("CUDA detail in 5 of 29 steps; the GPU side below (stages, GPU idle, GPU and CUDA API "
                            "columns) is over those 5, step time and OS costs over all 29"),
            std::string::npos)
      << text.str();
}

// Steps() with OS costs in the steps without CUDA detail only: the launching
// thread blocked in a syscall 400..900 (a voluntary switch) and two
// involuntary switches of a data worker.  Inside the window the kernel
// runs from 320, so the GPU side of the detail steps is as in Steps().
std::vector<v1::Event> StepsWithOsCostsOutsideTheWindow() {
  std::vector<v1::Event> events = Steps(true);
  for (uint64_t i = 0; i < 30; ++i) {
    if (i >= 10 && i <= 14) continue;
    const uint64_t t = kT0 + i * kStep;
    v1::Event off = Ev(t + 400);
    off.mutable_off_cpu()->set_duration_ns(500);
    off.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_SYSCALL);
    off.mutable_off_cpu()->set_syscall_nr(0);
    off.mutable_off_cpu()->set_voluntary(true);
    events.push_back(off);
  }
  return events;
}

TEST(CaptureDetail, OsSideIsOverAllStepsGpuSideOverTheDetailSteps) {
  StepAnalysis a = Analyze(StepsWithOsCostsOutsideTheWindow(), "steps=10..14");
  EXPECT_EQ(a.measured_steps, 5u);
  EXPECT_EQ(a.all_steps, 29u);
  // GPU side: the detail steps only, as without the OS costs.
  EXPECT_EQ(a.measured_total.gpu.idle_ns, 5 * 320u);
  EXPECT_EQ(a.measured_total.gpu.kernels_started, 5u);
  EXPECT_EQ(a.measured_total.gpu_idle[static_cast<size_t>(IdleCause::kOtherSyscalls)], 0u);
  // OS side: every measured step (step 0 is warmup), with or without
  // detail; the detail steps alone would say there were none.
  EXPECT_EQ(a.measured_total.off_cpu.syscall_ns, 0u);
  EXPECT_EQ(a.measured_total.os.launching.voluntary, 0u);
  EXPECT_EQ(a.all_steps_total.off_cpu.syscall_ns, 24 * 500u);
  EXPECT_EQ(a.all_steps_total.os.launching.voluntary, 24u);
  EXPECT_EQ(a.all_steps_total.cpu.data_wait_ns, 29 * 300u);
  EXPECT_EQ(a.all_steps_wall_ns, 29 * kStep);

  Diagnosis d = Diagnose(a);
  std::ostringstream json_text;
  JsonWriter json(json_text);
  json.BeginObject();
  WriteStepJsonMembers(a, d, json);
  json.EndObject();
  google::protobuf::Struct j;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json_text.str(), &j).ok()) << json_text.str();
  const google::protobuf::Struct& os = j.fields().at("step_os_summary").struct_value();
  EXPECT_EQ(os.fields().at("steps").number_value(), 29);
  EXPECT_EQ(os.fields().at("wall_ns").number_value(), 29 * kStep);
  EXPECT_EQ(os.fields().at("totals").struct_value().fields().at("off_cpu_syscall").number_value(), 24 * 500);
  EXPECT_EQ(os.fields()
                .at("os")
                .struct_value()
                .fields()
                .at("launching_thread")
                .struct_value()
                .fields()
                .at("voluntary")
                .number_value(),
            24);
  const google::protobuf::Struct& stages = j.fields().at("stage_summary").struct_value();
  EXPECT_EQ(stages.fields().at("steps").number_value(), 5);
  EXPECT_TRUE(stages.fields().at("cuda_detail_steps_only").bool_value());
  const google::protobuf::Struct& idle = j.fields().at("gpu_idle_attribution").struct_value();
  EXPECT_EQ(idle.fields().at("steps").number_value(), 5);
  EXPECT_EQ(idle.fields().at("idle_ns").number_value(), 5 * 320);
  const google::protobuf::Struct& summary = j.fields().at("step_analysis").struct_value();
  EXPECT_EQ(summary.fields().at("all_steps").number_value(), 29);
  EXPECT_EQ(summary.fields().at("measured_steps").number_value(), 5);

  std::ostringstream text;
  WriteStepTextReport(a, d, text, 12);
  const std::string t = text.str();
  EXPECT_NE(t.find("step time over 29 measured steps"), std::string::npos) << t;
  EXPECT_NE(t.find("GPU idle time by what the driving thread was doing: 0.002 of 0.005 ms (32.0%), 5 stretches, "
                   "longest 0.000 ms (over the 5 steps with CUDA detail)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("(over the 5 steps with CUDA detail)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("OS costs per measured step (over all 29 measured steps, with CUDA detail or not)"),
            std::string::npos)
      << t;
  // 24 voluntary switches over 29 steps.
  EXPECT_NE(t.find("launching thread                    0.8"), std::string::npos) << t;
  // Steps without detail show no GPU-side values.
  EXPECT_NE(t.find("need CUDA detail: '-' in steps"), std::string::npos) << t;

  std::ostringstream page;
  WriteHtmlReport(TraceSummary(), a, d, page);
  const std::string html = page.str();
  EXPECT_NE(html.find("id=\"os-steps\">Over all 29 measured steps"), std::string::npos);
  EXPECT_NE(html.find("is over those 5, wall time and OS costs over all 29"), std::string::npos);
  EXPECT_NE(html.find("of 5 measured steps with CUDA detail"), std::string::npos);
  size_t empty_gpu_bars = 0;
  for (size_t at = html.find(" no-detail\""); at != std::string::npos; at = html.find(" no-detail\"", at + 1)) {
    ++empty_gpu_bars;
  }
  EXPECT_EQ(empty_gpu_bars, 25u);  // every step but 10..14
}

}  // namespace
}  // namespace gpuos
