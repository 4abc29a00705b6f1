// The ranks table and JSON of a job recorded with capture windows: each
// rank's step time is over every step (a window's few steps, one of them
// its opening, say little of it), its communication and GPU figures over
// the steps with CUDA detail, and a straggler is not judged from a window
// too short for it -- the report says so.  Without ranks, processes that
// each train on their own get a table of their own.
#include "export/report/rank_report.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/rank_analysis.h"
#include "export/report/html_rank_section.h"
#include "export/report/json_writer.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/event_builders.h"

namespace gpuos {
namespace {

using test_events::Ev;
using test_events::Process;

constexpr uint64_t kT0 = 10'000'000, kStep = 1'000'000;
constexpr int kSteps = 30;
constexpr int kFirst = 10, kLast = 12;  // the window: 3 steps

// One rank process: its start, its rank, kSteps NVTX steps of kStep with a
// launch each, and kernels (CUPTI's records) only inside the window.
void AddRank(uint32_t pid, int32_t rank, std::vector<v1::Event>& events) {
  events.push_back(Process(pid, 1, "python3"));
  v1::Event info = Ev(2, pid, pid);
  info.mutable_rank_info()->set_rank(rank);
  info.mutable_rank_info()->set_world_size(2);
  info.mutable_rank_info()->set_host("h");
  events.push_back(info);
  for (int i = 0; i < kSteps; ++i) {
    const uint64_t t = kT0 + i * kStep;
    if (i == kFirst) {
      v1::Event open = Ev(t, pid, pid);
      open.mutable_capture_window()->set_edge(v1::CaptureWindow::OPEN);
      open.mutable_capture_window()->set_step(i);
      events.push_back(open);
    }
    v1::Event step = Ev(t, pid, pid);
    step.mutable_nvtx_range()->set_name("step " + std::to_string(i));
    step.mutable_nvtx_range()->set_duration_ns(kStep);
    events.push_back(step);
    v1::Event api = Ev(t + 1000, pid, pid);
    api.mutable_cuda_api()->set_name("cudaLaunchKernel_v7000");
    api.mutable_cuda_api()->set_duration_ns(5000);
    events.push_back(api);
    if (i >= kFirst && i <= kLast) {
      v1::Event kernel = Ev(t + 10'000, pid, 0);
      kernel.mutable_gpu_kernel()->set_duration_ns(kStep - 20'000);
      kernel.mutable_gpu_kernel()->set_stream(7);
      events.push_back(kernel);
    }
    if (i == kLast) {
      v1::Event close = Ev(t + kStep, pid, pid);
      close.mutable_capture_window()->set_edge(v1::CaptureWindow::CLOSE);
      close.mutable_capture_window()->set_step(i);
      events.push_back(close);
    }
  }
}

// WriteRankJsonMembers' object, parsed.
testing::AssertionResult RankJson(const RankAnalysis& a, google::protobuf::Struct* report) {
  std::ostringstream json_text;
  JsonWriter json(json_text);
  json.BeginObject();
  WriteRankJsonMembers(a, json);
  json.EndObject();
  if (google::protobuf::util::JsonStringToMessage(json_text.str(), report).ok()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "not JSON: " << json_text.str();
}

TEST(RankReport, CaptureWindowsGiveStepTimesOverAllStepsAndNoStragglerFromThreeSteps) {
  v1::TraceHeader header;
  header.set_capture_spec("steps=10..12");
  std::vector<v1::Event> events;
  AddRank(2, 0, events);
  AddRank(3, 1, events);
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->ranks.size(), 2u);
  for (const RankSummary& r : a->ranks) {
    EXPECT_EQ(r.steps.measured_steps, 3u) << "the steps with CUDA detail";
    EXPECT_EQ(r.steps.all_steps, static_cast<size_t>(kSteps - 1)) << "every step but the warm-up";
  }
  EXPECT_FALSE(a->straggler.has_value());
  EXPECT_EQ(a->straggler_not_judged,
            "rank 0 has 3 measured steps with CUDA detail; it takes 5 of every rank's (longer or more capture "
            "windows)");

  std::ostringstream text;
  WriteRankTextReport(*a, text);
  EXPECT_NE(text.str().find("steps = with CUDA detail/all"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(" 3/29 "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("straggler: not judged (rank 0 has 3 measured steps with CUDA detail"),
            std::string::npos)
      << text.str();
  std::ostringstream html;
  WriteHtmlRankSection(*a, /*report_pid=*/0, html);
  EXPECT_NE(html.str().find("<h2>Ranks</h2>"), std::string::npos) << html.str();
  EXPECT_NE(html.str().find("<td>3/29</td>"), std::string::npos) << html.str();
  EXPECT_NE(html.str().find("straggler: not judged (rank 0 has 3 measured steps"), std::string::npos) << html.str();

  google::protobuf::Struct report;
  ASSERT_TRUE(RankJson(*a, &report));
  const auto& rank0 = report.fields().at("ranks").list_value().values(0).struct_value().fields();
  EXPECT_EQ(rank0.at("steps").number_value(), 3);
  EXPECT_EQ(rank0.at("all_steps").number_value(), kSteps - 1);
  EXPECT_EQ(rank0.at("all_step_ns").struct_value().fields().at("mean").number_value(), kStep);
  EXPECT_NE(report.fields().at("straggler_not_judged").string_value(), "");
}

// Two hogwild processes (no ranks), each with its own optimizer steps: the
// table of training processes, without the rank columns, says the step
// report covers one, that they ran no collectives, and the JSON lists both.
TEST(RankReport, TrainingProcessesHaveATableOfTheirOwn) {
  v1::TraceHeader header;
  std::vector<v1::Event> events = {Process(1, 0, "python3"), Process(2, 1, "python3"), Process(3, 1, "python3")};
  for (uint32_t pid : {2u, 3u}) {
    for (int i = 0; i < kSteps; ++i) {
      v1::Event step = Ev(kT0 + i * kStep * pid, pid, pid);
      step.mutable_nvtx_range()->set_name("optimizer.step");
      step.mutable_nvtx_range()->set_domain("gpuos.python");
      step.mutable_nvtx_range()->set_duration_ns(kStep / 10);
      events.push_back(step);
    }
  }
  std::sort(events.begin(), events.end(), [](const v1::Event& x, const v1::Event& y) { return x.ts_ns() < y.ts_ns(); });
  auto a = AnalyzeRankEvents(header, events, StepOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->training_processes.size(), 2u);

  std::ostringstream text;
  WriteRankTextReport(*a, text, /*report_pid=*/3);
  const std::string t = text.str();
  EXPECT_NE(t.find("Training processes (2, each with a training loop of its own; the trace names no ranks"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("the only one it covers"), std::string::npos) << t;
  EXPECT_EQ(t.find("world"), std::string::npos) << "no rank columns: " << t;
  EXPECT_NE(t.find("   3*"), std::string::npos) << t;
  EXPECT_NE(t.find(" 2.000 "), std::string::npos) << "pid 2's steps are 2 ms: " << t;
  EXPECT_NE(t.find("no collectives between them"), std::string::npos) << t;

  // The HTML page shows the same table.
  std::ostringstream html;
  WriteHtmlRankSection(*a, /*report_pid=*/3, html);
  const std::string h = html.str();
  EXPECT_NE(h.find("<h2>Training processes</h2>"), std::string::npos) << h;
  EXPECT_NE(h.find("<td>3*</td>"), std::string::npos) << h;
  EXPECT_NE(h.find("<td>2.000</td>"), std::string::npos) << h;
  EXPECT_EQ(h.find(">world<"), std::string::npos) << h;
  EXPECT_NE(h.find("no collectives between them"), std::string::npos) << h;

  google::protobuf::Struct report;
  ASSERT_TRUE(RankJson(*a, &report));
  EXPECT_EQ(report.fields().at("ranks").list_value().values_size(), 0);
  const auto& processes = report.fields().at("training_processes").list_value();
  ASSERT_EQ(processes.values_size(), 2);
  EXPECT_EQ(processes.values(1).struct_value().fields().at("pid").number_value(), 3);
  EXPECT_EQ(processes.values(1).struct_value().fields().at("step_ns").struct_value().fields().at("mean").number_value(),
            3 * kStep);
  EXPECT_TRUE(processes.values(0).struct_value().fields().at("rank").has_null_value());
  EXPECT_FALSE(report.fields().at("training_processes_communicate").bool_value());
}

}  // namespace
}  // namespace gpuos
