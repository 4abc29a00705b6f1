// `gpuos-trace compare` on constructed traces whose numbers are known
// exactly: three .gpuos files written with TraceWriter, each 1 warm-up + 10
// steps of D ms (an NVTX "get batch" range of G ms, a 0.1 ms launch, then a
// kernel to the step's end under a sync), a data-worker process whose
// context switches per step grow from run to run.  They go through the
// same analysis as `gpuos-trace compare` (cli/compare_command.h), and the
// table, the deltas, the explaining stage and the knee are checked against
// the numbers the test put in; then the text, JSON and HTML renderings.
#include "cli/compare_command.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "export/report/compare_html.h"
#include "export/report/compare_report.h"
#include "gtest/gtest.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 7'000 * kMs;
constexpr uint32_t kPid = 100;
constexpr uint32_t kWorkerPid = 200;
constexpr int kSteps = 11;  // the first is warm-up

v1::Event At(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

struct RunShape {
  uint64_t step_ns;
  uint64_t data_ns;       // the "get batch" range at the step's start
  int worker_switches;    // per step
  uint32_t worker_faults;  // page faults of the worker over the whole trace
};

constexpr uint64_t kLaunchNs = 100 * kUs;

void WriteRun(const std::string& path, const RunShape& shape) {
  auto writer = TraceWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  v1::TraceHeader header;
  header.set_format_version(1);
  header.set_tracer_version("test");
  for (const char* arg : {"python3", "train.py", "--batch-size", "32"}) header.add_command_line(arg);
  header.set_root_pid(kPid);
  header.mutable_start_clock()->set_monotonic_ns(kT0);
  (*header.mutable_syscall_names())[202] = "futex";
  ASSERT_TRUE((*writer)->WriteHeader(header).ok());

  std::vector<v1::Event> events;
  v1::Event root = At(kT0 + 10 * kUs, kPid, kPid);
  root.mutable_process_start()->set_comm("python3");
  root.mutable_process_start()->set_is_root(true);
  root.mutable_process_start()->set_ppid(1);
  events.push_back(root);
  v1::Event worker = At(kT0 + 20 * kUs, kWorkerPid, kWorkerPid);
  worker.mutable_process_start()->set_comm("pt_data_worker");
  worker.mutable_process_start()->set_ppid(kPid);
  events.push_back(worker);
  uint32_t correlation = 1;
  for (int i = 0; i < kSteps; ++i) {
    const uint64_t t = kT0 + kMs + i * shape.step_ns;
    v1::Event step = At(t, kPid, kPid);
    step.mutable_nvtx_range()->set_name(absl::StrCat("step ", i));
    step.mutable_nvtx_range()->set_duration_ns(shape.step_ns);
    events.push_back(step);
    v1::Event data = At(t, kPid, kPid);
    data.mutable_nvtx_range()->set_name("get batch");
    data.mutable_nvtx_range()->set_duration_ns(shape.data_ns);
    events.push_back(data);
    const uint64_t launch = t + shape.data_ns;
    const uint64_t kernel = launch + kLaunchNs;
    const uint64_t end = t + shape.step_ns;
    v1::Event api = At(launch, kPid, kPid);
    api.mutable_cuda_api()->set_name("cudaLaunchKernel");
    api.mutable_cuda_api()->set_duration_ns(kLaunchNs);
    api.mutable_cuda_api()->set_correlation_id(correlation);
    events.push_back(api);
    v1::Event k = At(kernel, kPid, 0);
    k.mutable_gpu_kernel()->set_name("gemm");
    k.mutable_gpu_kernel()->set_duration_ns(end - kernel);
    k.mutable_gpu_kernel()->set_stream(7);
    k.mutable_gpu_kernel()->set_correlation_id(correlation++);
    events.push_back(k);
    v1::Event sync = At(kernel, kPid, kPid);
    sync.mutable_cuda_api()->set_name("cudaDeviceSynchronize");
    sync.mutable_cuda_api()->set_duration_ns(end - kernel);
    events.push_back(sync);
    for (int s = 0; s < shape.worker_switches; ++s) {
      v1::Event off = At(t + (s + 1) * 50 * kUs, kWorkerPid, kWorkerPid);
      off.mutable_off_cpu()->set_duration_ns(20 * kUs);
      off.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_FUTEX);
      off.mutable_off_cpu()->set_voluntary(true);
      events.push_back(off);
    }
  }
  const uint64_t end = kT0 + 2 * kMs + kSteps * shape.step_ns;
  v1::Event faults = At(end - kMs, kWorkerPid, kWorkerPid);
  faults.mutable_page_faults()->set_count(shape.worker_faults);
  faults.mutable_page_faults()->set_last_ns(end - kMs);
  events.push_back(faults);
  v1::Event futex = At(end, kPid, kPid);
  futex.mutable_syscall_stats()->set_nr(202);
  futex.mutable_syscall_stats()->set_calls(kSteps * 2);
  futex.mutable_syscall_stats()->set_total_ns(kSteps * kMs);
  futex.mutable_syscall_stats()->set_max_ns(kMs);
  events.push_back(futex);
  std::sort(events.begin(), events.end(),
            [](const v1::Event& a, const v1::Event& b) { return a.ts_ns() < b.ts_ns(); });
  for (const v1::Event& e : events) ASSERT_TRUE((*writer)->Append(e).ok());
  v1::TraceTrailer trailer;
  trailer.mutable_end_clock()->set_monotonic_ns(end + kMs);
  trailer.set_root_exited(true);
  ASSERT_TRUE((*writer)->WriteTrailer(trailer).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/gpuos-compare-test.XXXXXX";
    dir_ = mkdtemp(templ);
    // a -> b: the data wait shrinks by 3 ms (30%); b -> c: by 0.2 ms (2.9%).
    WriteRun(Path("a"), {10 * kMs, 4 * kMs, 0, 0});
    WriteRun(Path("b"), {7 * kMs, 1 * kMs, 2, 100});
    WriteRun(Path("c"), {6800 * kUs, 800 * kUs, 10, 1000});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name + ".gpuos"; }

  Comparison Compare(std::optional<double> knee = kDefaultKneeThreshold) {
    std::vector<CompareInput> inputs;
    for (const char* name : {"a", "b", "c"}) inputs.push_back({name, Path(name), std::nullopt, "", {}});
    return CompareRuns(inputs, StepOptions(), knee);
  }

  std::string dir_;
};

TEST_F(CompareTest, NumbersAreTheOnesPutIn) {
  const Comparison c = Compare();
  ASSERT_EQ(c.runs.size(), 3u);
  const RunFacts& a = c.runs[0];
  ASSERT_TRUE(a.failed.empty()) << a.failed;
  EXPECT_EQ(a.steps, 11u);
  EXPECT_EQ(a.measured_steps, 10u);
  EXPECT_NEAR(a.steps_per_s, 100.0, 1e-6);
  EXPECT_NEAR(c.runs[1].steps_per_s, 1000.0 / 7, 1e-6);
  ASSERT_TRUE(a.batch_size.has_value());
  EXPECT_EQ(*a.batch_size, 32u);
  EXPECT_EQ(a.batch_size_source, "command line");
  EXPECT_NEAR(*a.samples_per_s, 3200.0, 1e-6);
  EXPECT_NEAR(a.step_mean_ns, 10 * kMs, 1);
  EXPECT_NEAR(a.step_p95_ns, 10 * kMs, 1);
  auto pct = [](const RunFacts& r, Stage s) { return r.stage_pct[static_cast<size_t>(s)]; };
  EXPECT_NEAR(pct(a, Stage::kDataLoading), 40.0, 1e-6);
  EXPECT_NEAR(pct(a, Stage::kDispatch), 1.0, 1e-6);
  EXPECT_NEAR(pct(a, Stage::kGpuCompute), 59.0, 1e-6);
  EXPECT_NEAR(pct(c.runs[2], Stage::kDataLoading), 100.0 * 800 / 6800, 1e-6);
  EXPECT_NEAR(a.gpu_idle_total_pct, 41.0, 1e-6);
  EXPECT_NEAR(a.kernels_per_step, 1.0, 1e-9);
  EXPECT_NEAR(c.runs[1].os.workers.switches, 2.0, 1e-9);
  EXPECT_NEAR(c.runs[2].os.workers.switches, 10.0, 1e-9);
  EXPECT_NEAR(c.runs[2].os.worker_page_faults, 1000.0 / 11, 1e-6);
  ASSERT_FALSE(a.top_syscalls.empty());
  EXPECT_EQ(a.top_syscalls[0].name, "futex");
  EXPECT_NEAR(a.top_syscalls[0].ns, 1.0 * kMs, 1e-6);
  EXPECT_EQ(a.bottleneck, "data_loader_starvation");
}

TEST_F(CompareTest, DeltasNameTheStageThatExplainsTheChange) {
  const Comparison c = Compare();
  ASSERT_EQ(c.deltas.size(), 2u);
  const RunDelta& b = c.deltas[0];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.baseline, "a");
  EXPECT_NEAR(b.step_mean_ns, -3.0 * kMs, 1);
  EXPECT_NEAR(b.step_mean_pct, -30.0, 1e-6);
  ASSERT_TRUE(b.explaining_stage.has_value());
  EXPECT_EQ(*b.explaining_stage, Stage::kDataLoading);
  EXPECT_NEAR(b.explaining_share_pct, 100.0, 1e-6);
  EXPECT_NE(b.line.find("data loading explains 100%"), std::string::npos) << b.line;
  EXPECT_NEAR(c.deltas[1].stage_ns[static_cast<size_t>(Stage::kDataLoading)], -3.2 * kMs, 1);
}

TEST_F(CompareTest, KneeIsWhereTheStepStopsImproving) {
  const Comparison c = Compare();
  ASSERT_TRUE(c.knee.has_value());
  EXPECT_TRUE(c.knee->found) << c.knee->note;
  EXPECT_EQ(c.knee->at, "b");
  EXPECT_NEAR(c.knee->next_improvement, 0.2 / 7, 1e-9);
  bool worker_switches_grew = false;
  for (const Knee::Growth& g : c.knee->grew) {
    if (g.what == "data-worker context switches per step") {
      worker_switches_grew = true;
      EXPECT_NEAR(g.at_knee, 2.0, 1e-9);
      EXPECT_NEAR(g.at_last, 10.0, 1e-9);
    }
  }
  EXPECT_TRUE(worker_switches_grew);
  // A threshold under the last improvement (2.9%): still improving at every run.
  const Comparison low = Compare(0.02);
  EXPECT_FALSE(low.knee->found);
  EXPECT_NE(low.knee->note.find("no knee"), std::string::npos) << low.knee->note;
  // Asked for nothing: no knee.
  EXPECT_FALSE(Compare(std::nullopt).knee.has_value());
}

TEST_F(CompareTest, KneeWhereTheStepGetsLonger) {
  std::vector<CompareInput> inputs;
  for (const char* name : {"a", "b", "a"}) inputs.push_back({name, Path(name), std::nullopt, "", {}});
  inputs[2].name = "a-again";
  const Comparison c = CompareRuns(inputs, StepOptions(), kDefaultKneeThreshold);
  ASSERT_TRUE(c.knee && c.knee->found);
  EXPECT_EQ(c.knee->at, "b");
  EXPECT_NEAR(c.knee->next_improvement, -3.0 / 7, 1e-9);
  EXPECT_NE(c.knee->note.find("gets longer by 42.9%"), std::string::npos) << c.knee->note;
}

// Stages that move against each other: the largest explains more than all
// of the change, and the line names the one that offset it.
TEST(CompareDeltas, OffsettingStagesAreNamed) {
  RunFacts base, run;
  base.name = "base";
  run.name = "run";
  for (RunFacts* r : {&base, &run}) {
    r->measured_steps = 10;
    r->steps_per_s = 1;
  }
  base.stage_ns[static_cast<size_t>(Stage::kDataLoading)] = 4 * kMs;
  base.stage_ns[static_cast<size_t>(Stage::kOsOverhead)] = 6 * kMs;
  base.step_mean_ns = 10 * kMs;
  run.stage_ns[static_cast<size_t>(Stage::kDataLoading)] = 9 * kMs;
  run.stage_ns[static_cast<size_t>(Stage::kOsOverhead)] = 2 * kMs;
  run.step_mean_ns = 11 * kMs;
  const std::vector<RunDelta> deltas = DeltasAgainstFirst({base, run});
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(*deltas[0].explaining_stage, Stage::kDataLoading);
  EXPECT_NEAR(deltas[0].explaining_share_pct, 500.0, 1e-6);
  EXPECT_NE(deltas[0].line.find("data loading explains 500% of the change (+5.00 ms/step), mostly offset by OS "
                                "overhead (-4.00 ms/step)"),
            std::string::npos)
      << deltas[0].line;
  // Below 0.1% of the step nothing moved: no stage is named.
  run.step_mean_ns = base.step_mean_ns + 5 * kUs;
  EXPECT_FALSE(DeltasAgainstFirst({base, run})[0].explaining_stage.has_value());
}

TEST_F(CompareTest, FailedAndUnreadableRunsKeepTheirColumns) {
  std::vector<CompareInput> inputs = {{"a", Path("a"), std::nullopt, "", {}},
                                      {"broken", dir_ + "/missing.gpuos", std::nullopt, "", {}},
                                      {"crashed", "", std::nullopt, "failed: exit 3", {"python3", "x.py"}},
                                      {"c", Path("c"), 8, "", {}}};
  const Comparison c = CompareRuns(inputs, StepOptions(), kDefaultKneeThreshold);
  ASSERT_EQ(c.runs.size(), 4u);
  EXPECT_EQ(c.runs[1].failed.rfind("unreadable: ", 0), 0u) << c.runs[1].failed;
  EXPECT_EQ(c.runs[2].failed, "failed: exit 3");
  EXPECT_EQ(*c.runs[3].batch_size, 8u);
  EXPECT_EQ(c.runs[3].batch_size_source, "given");
  ASSERT_EQ(c.deltas.size(), 1u);  // c against a; failed runs have none
  EXPECT_EQ(c.deltas[0].name, "c");
  std::ostringstream text;
  WriteCompareText(c, text);
  EXPECT_NE(text.str().find("failed: exit 3"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("status"), std::string::npos);
}

TEST_F(CompareTest, TextJsonAndHtmlSayTheSame) {
  const Comparison c = Compare();
  std::ostringstream text;
  WriteCompareText(c, text);
  const std::string t = text.str();
  for (const char* expected : {"steps/s", "100.00", "142.86 (+43%)", "data loading %", "40.0", "14.3 (-25.7)",
                               "samples/s", "3200.0 (batch 32)", "Knee (threshold 5%): b",
                               "b: mean step 10.00 ms -> 7.00 ms (-30.0%) vs a; data loading explains 100%",
                               "grew: data-worker context switches per step 2.00 -> 10.00"}) {
    EXPECT_NE(t.find(expected), std::string::npos) << expected << "\n" << t;
  }
  std::ostringstream json;
  WriteCompareJson(c, json);
  const std::string j = json.str();
  for (const char* expected : {"\"runs\": [", "\"steps_per_s\": 100", "\"step_ns\": {", "\"data_loading\": 40",
                               "\"explaining_stage\": \"data_loading\"", "\"knee\": {", "\"at\": \"b\"",
                               "\"command\": \"python3 train.py --batch-size 32\""}) {
    EXPECT_NE(j.find(expected), std::string::npos) << expected << "\n" << j;
  }
  std::ostringstream html;
  WriteCompareHtml(c, html);
  const std::string h = html.str();
  size_t stacks = 0;
  for (size_t at = h.find("class=\"stack\""); at != std::string::npos; at = h.find("class=\"stack\"", at + 1)) ++stacks;
  EXPECT_EQ(stacks, 3u);
  EXPECT_NE(h.find("height:100.00%"), std::string::npos);  // the longest mean step fills the height
  EXPECT_NE(h.find("height:70.00%"), std::string::npos);   // 7 ms of 10
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("http"), std::string::npos);
}

// A trace cut short is compared up to where it ends, and says so.
TEST_F(CompareTest, DamagedTraceSaysSo) {
  std::string bytes;
  {
    std::ifstream in(Path("b"), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    bytes = buffer.str();
  }
  {
    std::ofstream out(Path("cut"), std::ios::binary | std::ios::trunc);
    out << bytes.substr(0, bytes.size() * 2 / 3);
  }
  std::vector<CompareInput> inputs = {{"a", Path("a"), std::nullopt, "", {}},
                                      {"cut", Path("cut"), std::nullopt, "", {}}};
  const Comparison c = CompareRuns(inputs, StepOptions(), std::nullopt);
  EXPECT_TRUE(c.runs[0].warning.empty()) << c.runs[0].warning;
  EXPECT_FALSE(c.runs[1].warning.empty());
  std::ostringstream text;
  WriteCompareText(c, text);
  EXPECT_NE(text.str().find("WARNING: "), std::string::npos) << text.str();
}

TEST_F(CompareTest, NamesFromTheTraceAreEscaped) {
  std::vector<CompareInput> inputs = {{"<b>x</b>", Path("a"), std::nullopt, "", {}}};
  const Comparison c = CompareRuns(inputs, StepOptions(), std::nullopt);
  std::ostringstream html;
  WriteCompareHtml(c, html);
  EXPECT_EQ(html.str().find("<b>x</b>"), std::string::npos);
  EXPECT_NE(html.str().find("&lt;b&gt;x&lt;/b&gt;"), std::string::npos);
}

}  // namespace
}  // namespace gpuos
