// The step report: JSON that parses (checked with protobuf's JSON parser
// into a google.protobuf.Struct) and carries the analysis' numbers, and text
// tables with the rows and sections the report promises.
#include "export/report/step_report.h"

#include <sstream>
#include <string>
#include <vector>

#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "support/diagnosis_sim.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr uint32_t kPid = 42;

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

v1::Event Kernel(uint64_t start, uint64_t end) {
  v1::Event e = Ev(start, 0);
  e.mutable_gpu_kernel()->set_duration_ns(end - start);
  e.mutable_gpu_kernel()->set_stream(7);
  return e;
}

v1::Event Api(uint64_t start, uint64_t end, const std::string& name) {
  v1::Event e = Ev(start);
  e.mutable_cuda_api()->set_duration_ns(end - start);
  e.mutable_cuda_api()->set_name(name);
  return e;
}

v1::Event Rename(const std::string& comm) {
  v1::Event e = Ev(0);
  e.mutable_comm_change()->set_new_comm(comm);
  return e;
}

// 15 steps of 1000 ns: a data fetch of 100 + 10 * step ns, a launch, then a
// kernel for the rest of the step.
StepAnalysis Fifteen(const std::string& comm = "trainer") {
  std::vector<v1::Event> events = {Rename(comm)};
  for (uint64_t i = 0; i < 15; ++i) {
    const uint64_t t = 10000 + i * 1000;
    const uint64_t data = 100 + 10 * i;
    events.push_back(Range(t, t + 1000, "step " + std::to_string(i)));
    events.push_back(Range(t, t + data, "get batch"));
    events.push_back(Api(t + data, t + data + 20, "cudaLaunchKernel_v7000"));
    events.push_back(Kernel(t + data + 20, t + 1000));
  }
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  EXPECT_TRUE(a.ok());
  return *a;
}

google::protobuf::Struct Json(const StepAnalysis& a, const Diagnosis& d) {
  std::ostringstream out;
  JsonWriter json(out);
  json.BeginObject();
  WriteStepJsonMembers(a, d, json);
  json.EndObject();
  google::protobuf::Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(out.str(), &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << out.str();
  return parsed;
}

const google::protobuf::Value& Get(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kMissing;
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing key " << key;
  return it == s.fields().end() ? kMissing : it->second;
}

TEST(StepReportTest, JsonCarriesEveryStepAndTheSummaries) {
  StepAnalysis a = Fifteen();
  Diagnosis d = Diagnose(a);
  google::protobuf::Struct j = Json(a, d);

  const auto& steps = Get(j, "steps").list_value();
  ASSERT_EQ(steps.values_size(), 15);
  for (int i = 0; i < 15; ++i) {
    const google::protobuf::Struct& s = steps.values(i).struct_value();
    const StepRecord& r = a.steps[i];
    EXPECT_EQ(Get(s, "index").number_value(), static_cast<double>(i));
    EXPECT_EQ(Get(s, "start_ns").number_value(), static_cast<double>(r.start_ns));
    EXPECT_EQ(Get(s, "duration_ns").number_value(), 1000.0);
    EXPECT_EQ(Get(s, "warmup").bool_value(), i == 0);
    const google::protobuf::Struct& b = Get(s, "breakdown").struct_value();
    EXPECT_EQ(Get(b, "data_wait").number_value(), 100.0 + 10 * i);
    EXPECT_EQ(Get(b, "launch_api").number_value(), 20.0);
    EXPECT_EQ(Get(b, "gpu_idle").number_value(), 120.0 + 10 * i);
    // The CPU parts add up to the step.
    double cpu = 0;
    for (const char* part : {"data_wait", "sync", "copy_api", "launch_api", "other_cuda_api", "other"}) {
      cpu += Get(b, part).number_value();
    }
    EXPECT_EQ(cpu, 1000.0);
    const google::protobuf::Struct& idle = Get(s, "gpu_idle").struct_value();
    EXPECT_EQ(Get(idle, "data_wait_running").number_value(), 100.0 + 10 * i);
    EXPECT_EQ(Get(idle, "launching").number_value(), 20.0);
    EXPECT_EQ(idle.fields_size(), static_cast<int>(kIdleCauseCount));
    EXPECT_EQ(Get(Get(s, "stages").struct_value(), "gpu_compute").number_value(), 880.0 - 10 * i);
  }

  const google::protobuf::Struct& meta = Get(j, "step_analysis").struct_value();
  EXPECT_EQ(Get(meta, "source").string_value(), "nvtx_step_ranges");
  EXPECT_EQ(Get(meta, "thread_comm").string_value(), "trainer");
  EXPECT_EQ(Get(meta, "measured_steps").number_value(), 14.0);

  const google::protobuf::Struct& stages = Get(j, "stage_summary").struct_value();
  const auto& rows = Get(stages, "stages").list_value();
  ASSERT_EQ(rows.values_size(), static_cast<int>(kStageCount));
  const google::protobuf::Struct& data = rows.values(0).struct_value();
  EXPECT_EQ(Get(data, "stage").string_value(), "data_loading");
  EXPECT_DOUBLE_EQ(Get(data, "mean_pct").number_value(), a.stage_share[0].mean * 100);
  EXPECT_DOUBLE_EQ(Get(data, "p95_pct").number_value(), a.stage_share[0].p95 * 100);
  EXPECT_EQ(Get(data, "total_ns").number_value(), static_cast<double>(a.measured_total.stages[0]));

  const google::protobuf::Struct& idle = Get(j, "gpu_idle_attribution").struct_value();
  EXPECT_EQ(Get(idle, "idle_ns").number_value(), static_cast<double>(a.measured_total.gpu.idle_ns));
  EXPECT_EQ(Get(idle, "causes").list_value().values_size(), static_cast<int>(kIdleCauseCount));

  const google::protobuf::Struct& diag = Get(j, "diagnosis").struct_value();
  EXPECT_EQ(Get(diag, "bottleneck").string_value(), BottleneckKey(d.primary.bottleneck));
  EXPECT_EQ(Get(diag, "evidence").string_value(), d.primary.evidence);
  EXPECT_EQ(Get(diag, "recommendation").string_value(), d.primary.recommendation);
}

// The copy-stream job with data stalls in two steps of twenty: the headline,
// each finding's gain, the stalls and what the job already does.
TEST(StepReportTest, DiagnosisCarriesHeadlineGainsStallsAndPractices) {
  namespace sim = diagnosis_sim;
  sim::Sim job(4, 8);
  for (int i = 0; i < 21; ++i) {
    job.BeginStep();
    job.StreamWait(sim::kCompute, sim::kCopyStream);
    job.GetBatch(i == 6 || i == 16 ? 65 * sim::kMs : 0, 100 * sim::kUs);
    job.Copy(2 * sim::kMs, /*pinned_async=*/true, sim::kCopyStream);
    for (int k = 0; k < 30; ++k) job.Launch(1 * sim::kMs, sim::kCompute);
    job.Sync();
    job.EndStep();
  }
  StepAnalysis a = job.Analyze();
  Diagnosis d = Diagnose(a);
  ASSERT_EQ(d.primary.bottleneck, Bottleneck::kGpuBound);
  ASSERT_EQ(d.secondary.size(), 1u);
  google::protobuf::Struct j = Json(a, d);
  const google::protobuf::Struct& diag = Get(j, "diagnosis").struct_value();
  EXPECT_EQ(Get(diag, "headline").string_value(), d.headline);
  EXPECT_TRUE(Get(diag, "gain_pct").has_null_value());
  EXPECT_EQ(Get(diag, "gain_model").string_value(), d.primary.gain_model);
  EXPECT_DOUBLE_EQ(Get(diag, "score_pct").number_value(), d.primary.score * 100);
  const google::protobuf::Struct& stall = Get(diag, "secondary").list_value().values(0).struct_value();
  EXPECT_EQ(Get(stall, "bottleneck").string_value(), "intermittent_stalls");
  EXPECT_DOUBLE_EQ(Get(stall, "gain_pct").number_value(), *d.secondary[0].gain * 100);
  const google::protobuf::Struct& tail = Get(diag, "intermittent_stalls").struct_value();
  EXPECT_EQ(Get(tail, "stalled_steps").number_value(), 2.0);
  const auto& indices = Get(tail, "stalled_step_indices").list_value();
  ASSERT_EQ(indices.values_size(), 2);
  EXPECT_EQ(indices.values(0).number_value(), 6.0);
  EXPECT_EQ(indices.values(1).number_value(), 16.0);
  EXPECT_EQ(Get(tail, "cause").string_value(), "data_loading");
  EXPECT_EQ(Get(tail, "idle_cause").string_value(), "data_wait_futex");
  EXPECT_DOUBLE_EQ(Get(tail, "share_of_run_pct").number_value(), d.stalls.share_of_run * 100);
  const google::protobuf::Struct& practices = Get(diag, "job_practices").struct_value();
  EXPECT_EQ(Get(practices, "htod_pinned").number_value(), 20.0);
  EXPECT_EQ(Get(practices, "htod_off_kernel_streams_pct").number_value(), 100.0);
  EXPECT_EQ(Get(practices, "online_cpus").number_value(), 8.0);
  EXPECT_FALSE(Get(practices, "cuda_graphs_in_use").bool_value());

  std::ostringstream out;
  WriteStepTextReport(a, d, out, 3);
  const std::string text = out.str();
  EXPECT_NE(text.find("Diagnosis: GPU-bound, with intermittent data stalls costing 17.7% of the run"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Also: intermittent stalls (17.7% of step time, gain 17.7%)"), std::string::npos) << text;
}

TEST(StepReportTest, TextShowsTheFirstStepsSummaryRowsAndEverySection) {
  StepAnalysis a = Fifteen();
  Diagnosis d = Diagnose(a);
  std::ostringstream out;
  WriteStepTextReport(a, d, out, 10);
  const std::string text = out.str();
  for (const char* needle :
       {"15 steps of thread 42 \"trainer\" (pid 42)", "1 warmup step left out", "\n    0*  ", "\n     9  ",
        "(5 more steps not shown", "\n  mean  ", "\n   p50  ", "\n   p95  ", "data loading", "GPU compute", "kernel dispatch",
        "waiting for data (running)", "launching thread", "Diagnosis: ", "Recommendation: "}) {
    EXPECT_NE(text.find(needle), std::string::npos) << "missing \"" << needle << "\" in\n" << text;
  }
  EXPECT_EQ(text.find("\n    10  "), std::string::npos) << text;
}

// A value read back mid-step in every step: the JSON's per-step count and
// after_sync summary, and the text's line under the idle table.
TEST(StepReportTest, SyncsBetweenLaunchesAndTheIdleAfterThemAreReported) {
  std::vector<v1::Event> events;
  for (uint64_t i = 0; i < 6; ++i) {
    const uint64_t t = 10000 + i * 1000;
    events.push_back(Range(t, t + 1000, "step " + std::to_string(i)));
    events.push_back(Api(t + 10, t + 20, "cudaLaunchKernel_v7000"));
    events.push_back(Kernel(t + 20, t + 300));
    events.push_back(Api(t + 30, t + 305, "cudaStreamSynchronize_v3020"));  // the kernel ends inside it
    events.push_back(Api(t + 400, t + 410, "cudaLaunchKernel_v7000"));
    events.push_back(Kernel(t + 410, t + 1000));
  }
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->measured_steps, 5u);
  Diagnosis d = Diagnose(*a);
  google::protobuf::Struct j = Json(*a, d);
  const google::protobuf::Struct& step = Get(j, "steps").list_value().values(1).struct_value();
  const google::protobuf::Struct& counts = Get(step, "counts").struct_value();
  EXPECT_EQ(Get(counts, "syncs_between_launches").number_value(), 1.0);
  EXPECT_EQ(Get(counts, "gpu_idle_after_sync_ns").number_value(), 110.0);  // 300 to 410
  const google::protobuf::Struct& after =
      Get(Get(j, "gpu_idle_attribution").struct_value(), "after_sync").struct_value();
  EXPECT_EQ(Get(after, "ns").number_value(), 5 * 110.0);
  EXPECT_EQ(Get(after, "stretches").number_value(), 5.0);
  EXPECT_DOUBLE_EQ(Get(after, "pct_of_step_time").number_value(), 11.0);
  EXPECT_DOUBLE_EQ(Get(after, "syncs_between_launches_per_step").number_value(), 1.0);
  std::ostringstream out;
  WriteStepTextReport(*a, d, out, 10);
  EXPECT_NE(out.str().find("after the driving thread's syncs (it waited for the GPU's queue to run dry): 0.001 ms "
                           "(11.0% of step time) in 5 stretches; 1.0 syncs per step fell between its launches"),
            std::string::npos)
      << out.str();
  const google::protobuf::Struct& diag = Get(j, "diagnosis").struct_value();
  // GPU idle 13%: GPU compute dominates, nowhere near launch-bound's 30%.
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kDominantStage);
  ASSERT_TRUE(Get(diag, "near_threshold").has_bool_value());
  EXPECT_FALSE(Get(diag, "near_threshold").bool_value());
  EXPECT_TRUE(Get(diag, "near_miss").has_null_value());
}

// cudaFree at each step's start (torch.cuda.empty_cache()): the GPU's
// queue runs dry inside it, and the step allocates again.
TEST(StepReportTest, AllocationCallsAndTheIdleInAndAfterThemAreReported) {
  std::vector<v1::Event> events;
  for (uint64_t i = 0; i < 6; ++i) {
    const uint64_t t = 10000 + i * 1000;
    events.push_back(Range(t, t + 1000, "step " + std::to_string(i)));
    events.push_back(Api(t, t + 100, "cudaFree_v3020"));  // the previous kernel ends inside it, at t + 50
    events.push_back(Api(t + 150, t + 200, "cudaMalloc_v3020"));
    events.push_back(Api(t + 250, t + 260, "cudaLaunchKernel_v7000"));
    events.push_back(Kernel(t + 300, t + 1050));
  }
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->measured_steps, 5u);
  Diagnosis d = Diagnose(*a);
  google::protobuf::Struct j = Json(*a, d);
  const google::protobuf::Struct& step = Get(j, "steps").list_value().values(1).struct_value();
  const google::protobuf::Struct& counts = Get(step, "counts").struct_value();
  EXPECT_EQ(Get(counts, "allocation_calls").number_value(), 2.0);
  EXPECT_EQ(Get(counts, "gpu_idle_allocation_ns").number_value(), 250.0);  // 50 to 300
  EXPECT_EQ(Get(Get(step, "breakdown").struct_value(), "allocate_api").number_value(), 150.0);
  EXPECT_EQ(Get(Get(step, "gpu_idle").struct_value(), "allocating").number_value(), 100.0);  // 50-100, 150-200
  const google::protobuf::Struct& alloc =
      Get(Get(j, "gpu_idle_attribution").struct_value(), "allocation").struct_value();
  EXPECT_EQ(Get(alloc, "ns").number_value(), 5 * 250.0);
  EXPECT_EQ(Get(alloc, "stretches_after").number_value(), 5.0);
  EXPECT_DOUBLE_EQ(Get(alloc, "pct_of_step_time").number_value(), 25.0);
  EXPECT_DOUBLE_EQ(Get(alloc, "allocation_calls_per_step").number_value(), 2.0);
  std::ostringstream out;
  WriteStepTextReport(*a, d, out, 10);
  EXPECT_NE(out.str().find("in and after the driving thread's allocation calls (cudaMalloc, cudaFree; a free waits "
                           "for the GPU's queue to run dry): 0.001 ms (25.0% of step time); 2.0 calls per step"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(d.primary.bottleneck, Bottleneck::kAllocatorChurn);
  EXPECT_EQ(Get(Get(j, "diagnosis").struct_value(), "bottleneck").string_value(), "allocator_churn");
}

// Attached while the job stalled: the window opens 6000 ns before its first
// step and its 15 steps hold 15000 ns of a 22000 ns window.  The text says
// so before the figures, the JSON gives the parts; a window the steps fill
// says nothing, and a launched trace has no coverage.
TEST(StepReportTest, AnAttachWindowTheStepsDoNotHoldIsSaid) {
  std::vector<v1::Event> events = {Rename("trainer")};
  for (uint64_t i = 0; i < 15; ++i) {
    const uint64_t t = 10000 + i * 1000;
    events.push_back(Range(t, t + 1000, "step " + std::to_string(i)));
    events.push_back(Api(t + 100, t + 120, "cudaLaunchKernel_v7000"));
    events.push_back(Kernel(t + 120, t + 1000));
  }
  v1::TraceHeader header;
  header.mutable_attach()->add_target_pids(kPid);
  header.mutable_attach()->set_start_ns(4000);
  v1::TraceTrailer trailer;
  trailer.set_attach_end_ns(26000);
  auto a = AnalyzeStepEvents(header, events, StepOptions(), &trailer);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::optional<AttachCoverage> c = a->Coverage();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->window_ns, 22000u);
  EXPECT_EQ(c->in_steps_ns, 15000u);
  EXPECT_EQ(c->before_first_ns, 6000u);
  EXPECT_EQ(c->after_last_ns, 1000u);
  std::ostringstream text;
  WriteStepTextReport(*a, Diagnose(*a), text);
  EXPECT_NE(text.str().find("the steps hold 0.000 s of the 0.000 s attach window (68.2%)"), std::string::npos)
      << text.str();
  std::ostringstream json_text;
  JsonWriter json(json_text);
  json.BeginObject();
  WriteStepJsonMembers(*a, Diagnose(*a), json);
  json.EndObject();
  google::protobuf::Struct report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json_text.str(), &report).ok());
  const auto& cov = report.fields().at("step_analysis").struct_value().fields().at("attach_coverage").struct_value();
  EXPECT_EQ(cov.fields().at("before_first_step_ns").number_value(), 6000);
  EXPECT_EQ(cov.fields().at("in_steps_ns").number_value(), 15000);

  header.mutable_attach()->set_start_ns(10000);
  trailer.set_attach_end_ns(25100);
  a = AnalyzeStepEvents(header, events, StepOptions(), &trailer);
  ASSERT_TRUE(a.ok());
  std::ostringstream filled;
  WriteStepTextReport(*a, Diagnose(*a), filled);
  EXPECT_EQ(filled.str().find("the steps hold"), std::string::npos) << filled.str();
  a = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->Coverage().has_value());
}

TEST(StepReportTest, NoSteps) {
  auto a = AnalyzeStepEvents(v1::TraceHeader(), {Range(0, 10, "forward")}, StepOptions());
  ASSERT_TRUE(a.ok());
  Diagnosis d = Diagnose(*a);
  std::ostringstream out;
  WriteStepTextReport(*a, d, out);
  EXPECT_NE(out.str().find("No steps: no NVTX range is named like a training step"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("Diagnosis"), std::string::npos);

  google::protobuf::Struct j = Json(*a, d);
  EXPECT_EQ(Get(j, "steps").list_value().values_size(), 0);
  EXPECT_TRUE(Get(j, "stage_summary").has_null_value());
  EXPECT_TRUE(Get(j, "gpu_idle_attribution").has_null_value());
  EXPECT_EQ(Get(Get(j, "diagnosis").struct_value(), "bottleneck").string_value(), "no_steps");
  EXPECT_EQ(Get(Get(j, "step_analysis").struct_value(), "source").string_value(), "none");
}

TEST(StepReportTest, HostileThreadNamesAreEscaped) {
  StepAnalysis a = Fifteen("evil\x1b[2J\xff");
  Diagnosis d = Diagnose(a);
  std::ostringstream out;
  WriteStepTextReport(a, d, out);
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
  EXPECT_NE(out.str().find("evil\\x1b[2J\\xff"), std::string::npos) << out.str();
  google::protobuf::Struct j = Json(a, d);  // valid UTF-8 JSON
  EXPECT_EQ(Get(Get(j, "step_analysis").struct_value(), "thread_comm").string_value(), "evil\x1b[2J\xef\xbf\xbd");
}

}  // namespace
}  // namespace gpuos
