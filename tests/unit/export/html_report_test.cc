// The HTML report (`gpuos-trace report FILE --html OUT`): a .gpuos trace
// written with TraceWriter (NVTX steps, data fetches, kernels, a pageable
// memcpy, off-CPU waits, a data worker, drops, a comm name that is an XSS
// attempt) goes through the same summaries as `gpuos-trace report`, and the
// page is checked as text (every step drawn, every trace string escaped,
// nothing fetched from elsewhere, the cap on bars) and then rendered by
// headless Chromium: the DOM after the page's script ran must hold the
// diagnosis, one bar per step, the kernels and the escaped comm.  Without a
// Chromium the rendering test is skipped (apt-get install chromium).
//
// GPUOS_HTML_SCREENSHOT_DIR=dir also saves each page and a screenshot of
// it there, for a person to look at.
#include "export/report/html_blocks.h"
#include "export/report/html_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "support/diagnosis_sim.h"
#include "export/report/sync_drain_text.h"
#include "export/report/text_table.h"
#include "gtest/gtest.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 5'000 * kMs;
constexpr uint32_t kPid = 100;
constexpr uint32_t kEvilTid = 101;
constexpr uint32_t kWorkerPid = 200;
constexpr char kEvilComm[] = "<script>alert(1)</script>";
constexpr char kGemm[] = "void gemm_kernel<float, 128>(float const*, float*)";
constexpr char kAdd[] = "elementwise_add";

// ---- A trace on disk ------------------------------------------------------

v1::Event At(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}
v1::Event ProcessStart(uint64_t ts, uint32_t pid, uint32_t ppid, const std::string& comm, bool root) {
  v1::Event e = At(ts, pid, pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm(comm);
  e.mutable_process_start()->set_is_root(root);
  return e;
}
v1::Event ThreadStart(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
  v1::Event e = At(ts, pid, tid);
  e.mutable_thread_start()->set_comm(comm);
  return e;
}
v1::Event Range(uint64_t start, uint64_t end, const std::string& name) {
  v1::Event e = At(start, kPid, kPid);
  e.mutable_nvtx_range()->set_duration_ns(end - start);
  e.mutable_nvtx_range()->set_name(name);
  return e;
}
v1::Event Api(uint64_t start, uint64_t end, const std::string& name, uint32_t correlation) {
  v1::Event e = At(start, kPid, kPid);
  e.mutable_cuda_api()->set_duration_ns(end - start);
  e.mutable_cuda_api()->set_name(name);
  e.mutable_cuda_api()->set_correlation_id(correlation);
  return e;
}
v1::Event Kernel(uint64_t start, uint64_t end, const std::string& name, uint32_t correlation) {
  v1::Event e = At(start, kPid, 0);
  e.mutable_gpu_kernel()->set_duration_ns(end - start);
  e.mutable_gpu_kernel()->set_name(name);
  e.mutable_gpu_kernel()->set_stream(7);
  e.mutable_gpu_kernel()->set_correlation_id(correlation);
  return e;
}
v1::Event Memcpy(uint64_t start, uint64_t end, uint64_t bytes, uint32_t correlation) {
  v1::Event e = At(start, kPid, 0);
  v1::GpuMemcpy* m = e.mutable_gpu_memcpy();
  m->set_duration_ns(end - start);
  m->set_bytes(bytes);
  m->set_direction(v1::MEMCPY_HTOD);
  m->set_src_kind(v1::MEMORY_PAGEABLE);
  m->set_dst_kind(v1::MEMORY_DEVICE);
  m->set_stream(7);
  m->set_correlation_id(correlation);
  return e;
}
v1::Event OffCpu(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t duration, v1::OffCpuCause cause, int32_t nr) {
  v1::Event e = At(ts, pid, tid);
  e.mutable_off_cpu()->set_duration_ns(duration);
  e.mutable_off_cpu()->set_runqueue_ns(duration / 10);
  e.mutable_off_cpu()->set_cause(cause);
  e.mutable_off_cpu()->set_syscall_nr(nr);
  e.mutable_off_cpu()->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
  return e;
}
v1::Event Syscalls(uint64_t ts, uint32_t pid, uint32_t tid, int32_t nr, uint64_t calls, uint64_t total_ns) {
  v1::Event e = At(ts, pid, tid);
  e.mutable_syscall_stats()->set_nr(nr);
  e.mutable_syscall_stats()->set_calls(calls);
  e.mutable_syscall_stats()->set_total_ns(total_ns);
  e.mutable_syscall_stats()->set_max_ns(total_ns / calls);
  return e;
}

struct TraceShape {
  int steps = 8;
  bool cuda = true;   // NVTX and CUDA events
  bool drops = true;  // a TracerStats with ring-buffer drops
};

// `shape.steps` steps of 10 ms on the main thread: a data fetch blocked in
// futex (3 to 4.4 ms), a 1.6 ms cudaMemcpy of 4 MiB of pageable memory, two
// launches, a sync while a GEMM and an add run, then CPU work: data-loader
// starvation first, pageable copies second.
void WriteTrace(const std::string& path, const TraceShape& shape) {
  auto writer = TraceWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  v1::TraceHeader header;
  header.set_format_version(1);
  header.set_tracer_version("test");
  header.set_hostname("gpu-node-1");
  header.set_kernel_release("6.1.0");
  header.set_arch("x86_64");
  header.add_command_line("python3");
  header.add_command_line("train.py");
  header.add_command_line("--tag=<b>bold</b>");
  header.set_root_pid(kPid);
  header.mutable_start_clock()->set_monotonic_ns(kT0);
  header.mutable_start_clock()->set_realtime_ns(1'700'000'000ull * 1'000'000'000ull);
  (*header.mutable_syscall_names())[0] = "read";
  (*header.mutable_syscall_names())[202] = "futex";
  ASSERT_TRUE((*writer)->WriteHeader(header).ok());

  std::vector<v1::Event> events = {
      ProcessStart(kT0 + 10 * kUs, kPid, 1, "python3", true),
      ThreadStart(kT0 + 20 * kUs, kPid, kEvilTid, kEvilComm),
      ProcessStart(kT0 + 30 * kUs, kWorkerPid, kPid, "pt_data_worker", false),
  };
  uint32_t correlation = 1;
  for (int i = 0; i < shape.steps; ++i) {
    const uint64_t t = kT0 + kMs + i * 10 * kMs;
    const uint64_t data = 3 * kMs + i * 200 * kUs % (1500 * kUs);
    events.push_back(OffCpu(t + 100 * kUs, kPid, kPid, data - 200 * kUs, v1::OFF_CPU_CAUSE_FUTEX, 202));
    events.push_back(OffCpu(t + kMs, kWorkerPid, kWorkerPid, 500 * kUs, v1::OFF_CPU_CAUSE_SYSCALL, 0));
    events.push_back(OffCpu(t + 3 * kMs, kPid, kEvilTid, 300 * kUs, v1::OFF_CPU_CAUSE_PREEMPTED, -1));
    if (!shape.cuda) continue;
    events.push_back(Range(t, t + 10 * kMs, absl::StrCat("step ", i)));
    events.push_back(Range(t, t + data, "get batch"));
    const uint64_t c = t + data;
    events.push_back(Api(c, c + 1600 * kUs, "cudaMemcpy", correlation));
    events.push_back(Memcpy(c + 1200 * kUs, c + 1550 * kUs, 4 << 20, correlation++));
    events.push_back(Api(c + 1600 * kUs, c + 1620 * kUs, "cudaLaunchKernel", correlation));
    events.push_back(Kernel(c + 1700 * kUs, t + 9 * kMs, kGemm, correlation++));
    events.push_back(Api(c + 1630 * kUs, c + 1650 * kUs, "cudaLaunchKernel", correlation));
    events.push_back(Kernel(t + 9 * kMs, t + 9500 * kUs, kAdd, correlation++));
    events.push_back(Api(c + 1660 * kUs, t + 9500 * kUs, "cudaDeviceSynchronize", 0));
  }
  const uint64_t end = kT0 + 2 * kMs + shape.steps * 10 * kMs;
  events.push_back(Syscalls(end, kPid, kPid, 202, 3 * shape.steps + 1, 40 * kMs));
  events.push_back(Syscalls(end, kPid, kEvilTid, 0, 50, 2 * kMs));
  events.push_back(Syscalls(end, kWorkerPid, kWorkerPid, 0, 200, 9 * kMs));
  if (shape.drops) {
    v1::Event stats = At(end, kPid, kPid);
    (*stats.mutable_tracer_stats()->mutable_ring_buffer_drops())["off_cpu"] = 3;
    events.push_back(stats);
  }
  for (const v1::Event& e : events) ASSERT_TRUE((*writer)->Append(e).ok());
  v1::TraceTrailer trailer;
  trailer.mutable_end_clock()->set_monotonic_ns(end + kMs);
  trailer.set_root_exited(true);
  ASSERT_TRUE((*writer)->WriteTrailer(trailer).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

// What RunReport (agent/cli/main.cc) computes before it renders.
struct Report {
  TraceSummary summary;
  StepAnalysis steps;
  Diagnosis diagnosis;
  std::string html;
};

Report Analyze(const std::string& trace, const std::string& html_path,
               const HtmlReportOptions& options = HtmlReportOptions()) {
  Report r;
  auto summary = SummarizeTrace(trace);
  EXPECT_TRUE(summary.ok()) << summary.status();
  auto steps = AnalyzeSteps(trace, StepOptions());
  EXPECT_TRUE(steps.ok()) << steps.status();
  if (!summary.ok() || !steps.ok()) return r;
  r.summary = *summary;
  r.steps = *steps;
  r.diagnosis = Diagnose(r.steps);
  absl::Status written = WriteHtmlReportFile(html_path, r.summary, r.steps, r.diagnosis, options);
  EXPECT_TRUE(written.ok()) << written;
  std::ifstream in(html_path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  r.html = buffer.str();
  return r;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// How a serialized DOM writes a text node: &, < and > as entities, quotes
// as they are.
std::string TextNode(std::string_view text) {
  std::string out;
  for (char c : Printable(text)) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

// ---- Headless Chromium -------------------------------------------------------

std::optional<std::string> FindChromium() {
  if (const char* forced = getenv("GPUOS_CHROMIUM"); forced && *forced) return std::string(forced);
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
      const std::string candidate = absl::StrCat(dir, "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return std::nullopt;
}

// Runs headless Chromium with `mode` (--dump-dom, --screenshot=...) on
// `html`; returns its stdout.  Quoting: our paths are mkdtemp's.
std::string RunChromium(const std::string& chromium, const std::string& profile, const std::string& mode,
                        const std::string& html, const std::string& log, int* status) {
  const std::string command =
      absl::StrCat("timeout 60 '", chromium,
                   "' --headless --no-sandbox --disable-gpu --disable-background-networking "
                   "--disable-component-update --disable-sync --no-first-run --user-data-dir='",
                   profile, "' ", mode, " 'file://", html, "' 2>>'", log, "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *status = -1;
    return "";
  }
  std::string out;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  *status = pclose(pipe);
  return out;
}

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string all = s.str();
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

// With GPUOS_HTML_SCREENSHOT_DIR set and a Chromium found: a PNG of the
// page at `html` as <dir>/<name>.png and the page as <dir>/<name>.html, for
// a person to look at.
void MaybeScreenshot(const std::string& html, const std::string& name, const std::string& workdir) {
  const char* shots = getenv("GPUOS_HTML_SCREENSHOT_DIR");
  const std::optional<std::string> chromium = FindChromium();
  if (!shots || !*shots || !chromium) return;
  const std::string profile = workdir + "/shot_profile";
  mkdir(profile.c_str(), 0700);
  const std::string png = absl::StrCat(shots, "/", name, ".png");
  int status = 0;
  RunChromium(*chromium, profile, absl::StrCat("--window-size=1400,2000 --screenshot='", png, "'"), html,
              workdir + "/shot.log", &status);
  struct stat st {};
  EXPECT_EQ(stat(png.c_str(), &st), 0) << ReadLog(workdir + "/shot.log");
  EXPECT_GT(st.st_size, 10000) << "an almost empty screenshot";
  std::filesystem::copy_file(html, absl::StrCat(shots, "/", name, ".html"),
                             std::filesystem::copy_options::overwrite_existing);
}

class HtmlReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuos_html_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// The page as text: what a browser will be given.
TEST_F(HtmlReportTest, PageShowsEveryStepAndEscapesTraceStrings) {
  WriteTrace(Path("run.gpuos"), TraceShape());
  Report r = Analyze(Path("run.gpuos"), Path("run.html"));
  ASSERT_TRUE(r.steps.has_steps()) << r.steps.note;
  ASSERT_EQ(r.steps.steps.size(), 8u);
  const std::string& html = r.html;

  EXPECT_EQ(Count(html, "class=\"step-bar cpu"), r.steps.steps.size());
  EXPECT_EQ(Count(html, "class=\"step-bar gpu"), r.steps.steps.size());
  EXPECT_EQ(Count(html, "class=\"step-bar cpu warmup\""), r.steps.steps.size() - r.steps.measured_steps);

  // Trace strings never reach the page as markup.
  EXPECT_EQ(html.find(kEvilComm), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(Count(html, "<script"), 1u);  // the page's own

  // Self-contained: nothing to fetch.
  for (const char* external : {"http://", "https://", "src=", "<link", "@import", "url("}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }

  // The summaries' contents, as the analysis computed them.
  EXPECT_NE(html.find(HtmlEscape(BottleneckTitle(r.diagnosis.primary.bottleneck))), std::string::npos);
  EXPECT_NE(html.find(HtmlEscape(r.diagnosis.primary.evidence)), std::string::npos);
  EXPECT_NE(html.find(HtmlEscape(r.diagnosis.primary.recommendation)), std::string::npos);
  for (const Finding& f : r.diagnosis.secondary) {
    EXPECT_NE(html.find(HtmlEscape(f.evidence)), std::string::npos) << BottleneckTitle(f.bottleneck);
  }
  ASSERT_EQ(r.summary.cuda.kernels.size(), 2u);
  for (const NamedTotals& k : r.summary.cuda.kernels) EXPECT_NE(html.find(HtmlEscape(k.name)), std::string::npos);
  for (const SyscallRow& s : r.summary.os.syscalls) EXPECT_NE(html.find(HtmlEscape(s.name)), std::string::npos);
  EXPECT_NE(html.find("id=\"dropped\""), std::string::npos);  // 3 events lost: said loudly
  EXPECT_NE(html.find("pageable"), std::string::npos);
  for (size_t i = 0; i < kIdleCauseCount; ++i) {
    if (r.steps.measured_total.gpu_idle[i] == 0) continue;
    EXPECT_NE(html.find(HtmlEscape(IdleCauseName(static_cast<IdleCause>(i)))), std::string::npos);
  }
  EXPECT_EQ(html.find("No CUDA or NVTX events"), std::string::npos);
  EXPECT_EQ(html.find("No training steps"), std::string::npos);
  EXPECT_NE(r.diagnosis.primary.bottleneck, Bottleneck::kNoneDominant) << "the trace should show a bottleneck";
}

// The diagnosis box of a GPU-bound job with intermittent data stalls: the
// headline, each finding's gain and the stalled steps by index.
TEST(HtmlDiagnosisTest, ShowsHeadlineGainsAndStalledSteps) {
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
  StepAnalysis steps = job.Analyze();
  Diagnosis d = Diagnose(steps);
  ASSERT_TRUE(d.stalls.found());
  std::ostringstream out;
  WriteHtmlReport(TraceSummary(), steps, d, out);
  const std::string html = out.str();
  EXPECT_NE(html.find("<p class=\"diag-headline\">" + HtmlEscape(d.headline) + "</p>"), std::string::npos);
  EXPECT_NE(d.headline.find("with intermittent data stalls"), std::string::npos) << d.headline;
  EXPECT_NE(html.find("gain not estimated"), std::string::npos);  // GPU-bound: the kernel speed-up is unknown
  EXPECT_NE(html.find(absl::StrFormat("gain %.1f%% of the mean step", *d.secondary[0].gain * 100)),
            std::string::npos);
  EXPECT_NE(html.find("Stalled steps (longer than"), std::string::npos);
  EXPECT_NE(html.find("median 30.128 ms): 6, 16</p>"), std::string::npos);
}

TEST_F(HtmlReportTest, WithoutStepsOrCudaSaysWhatIsMissing) {
  TraceShape shape;
  shape.cuda = false;
  shape.drops = false;
  WriteTrace(Path("os_only.gpuos"), shape);
  Report r = Analyze(Path("os_only.gpuos"), Path("os_only.html"));
  ASSERT_FALSE(r.steps.has_steps());
  ASSERT_TRUE(r.summary.cuda.empty());
  EXPECT_NE(r.html.find("No training steps"), std::string::npos);
  EXPECT_NE(r.html.find("No CUDA or NVTX events"), std::string::npos);
  EXPECT_EQ(r.html.find("class=\"step-bar"), std::string::npos);
  EXPECT_EQ(r.html.find("id=\"dropped\""), std::string::npos);
  // What exists is still there: processes, the escaped thread, syscalls.
  EXPECT_NE(r.html.find("pt_data_worker"), std::string::npos);
  EXPECT_NE(r.html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(r.html.find(">futex<"), std::string::npos);
  EXPECT_NE(r.html.find(HtmlEscape(BottleneckTitle(Bottleneck::kNoSteps))), std::string::npos);
  EXPECT_NE(r.html.find("</html>"), std::string::npos);
  MaybeScreenshot(Path("os_only.html"), "html_report_no_steps", dir_);
}

TEST_F(HtmlReportTest, ManyStepsAreCappedAndStaySmall) {
  TraceShape shape;
  shape.steps = 2600;
  WriteTrace(Path("long.gpuos"), shape);
  HtmlReportOptions options;  // the defaults RunReport uses
  Report r = Analyze(Path("long.gpuos"), Path("long.html"), options);
  ASSERT_EQ(r.steps.steps.size(), 2600u);
  EXPECT_EQ(Count(r.html, "class=\"step-bar cpu"), options.max_step_bars);
  EXPECT_EQ(Count(r.html, "class=\"step-bar gpu"), options.max_step_bars);
  EXPECT_NE(r.html.find("id=\"steps-capped\""), std::string::npos);
  EXPECT_LT(r.html.size(), 5u << 20) << "the page should stay a few MB";
  RecordProperty("html_bytes", static_cast<int>(r.html.size()));
  MaybeScreenshot(Path("long.html"), "html_report_many_steps", dir_);
}

// A slow warmup step must not flatten the measured ones: the scale follows
// the measured steps and the warmup bar is cut off and marked.
TEST(HtmlReportChartTest, SlowWarmupStepIsCutOffNotScaledTo) {
  std::vector<v1::Event> events;
  for (uint64_t i = 0; i < 6; ++i) {
    const uint64_t t = kT0 + i * 100 * kMs;
    events.push_back(Range(t, t + (i == 0 ? 80 : 10) * kMs, absl::StrCat("step ", i)));
  }
  auto steps = AnalyzeStepEvents(v1::TraceHeader(), events, StepOptions());
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->steps.size(), 6u);
  ASSERT_TRUE(steps->steps[0].warmup);
  std::ostringstream out;
  WriteHtmlReport(TraceSummary(), *steps, Diagnose(*steps), out);
  const std::string html = out.str();
  EXPECT_EQ(Count(html, "class=\"clip\""), 2u);  // the warmup bar in each chart
  EXPECT_EQ(Count(html, "cut off at the top)"), 2u);
  EXPECT_EQ(Count(html, "class=\"step-bar cpu warmup\""), 1u);
  // The axis tops out near 10 ms, not 80.
  EXPECT_NE(html.find(">10</text>"), std::string::npos);
  EXPECT_EQ(html.find(">80</text>"), std::string::npos);
}

TEST(HtmlEscapeTest, EscapesMarkupAndControlBytes) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape(std::string("x\x01y\xff", 4)), "x\\x01y\\xff");
  EXPECT_EQ(HtmlEscape("kernel<float>"), "kernel&lt;float&gt;");
}

TEST_F(HtmlReportTest, RendersInHeadlessChromium) {
  const std::optional<std::string> chromium = FindChromium();
  if (!chromium) {
    GTEST_SKIP() << "chromium not installed (apt-get install -y chromium); the page was checked as text only";
  }
  WriteTrace(Path("run.gpuos"), TraceShape());
  Report r = Analyze(Path("run.gpuos"), Path("run.html"));
  ASSERT_TRUE(r.steps.has_steps());
  const std::string profile = Path("profile");
  ASSERT_EQ(mkdir(profile.c_str(), 0700), 0);
  int status = 0;
  const std::string dom = RunChromium(*chromium, profile, "--dump-dom", Path("run.html"), Path("chromium.log"), &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "chromium failed (status " << status << "):\n" << ReadLog(Path("chromium.log"));
  ASSERT_FALSE(dom.empty()) << ReadLog(Path("chromium.log"));

  // The page's script ran and found its tables.
  EXPECT_NE(dom.find("data-sortable-tables=\""), std::string::npos);
  EXPECT_EQ(dom.find("data-sortable-tables=\"0\""), std::string::npos);
  // One bar per step in each chart, as the browser parsed them.
  EXPECT_EQ(Count(dom, "class=\"step-bar cpu"), r.steps.steps.size());
  EXPECT_EQ(Count(dom, "class=\"step-bar gpu"), r.steps.steps.size());
  // The diagnosis and the kernels, as text the browser shows.
  EXPECT_NE(dom.find(TextNode(BottleneckTitle(r.diagnosis.primary.bottleneck))), std::string::npos);
  EXPECT_NE(dom.find(TextNode(r.diagnosis.primary.evidence)), std::string::npos);
  EXPECT_NE(dom.find(TextNode(r.diagnosis.primary.recommendation)), std::string::npos);
  EXPECT_NE(dom.find(TextNode(kGemm)), std::string::npos);
  EXPECT_NE(dom.find(TextNode(kAdd)), std::string::npos);
  // The hostile comm is text, not an element: the only script is the page's.
  EXPECT_NE(dom.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(dom.find(kEvilComm), std::string::npos);
  EXPECT_EQ(Count(dom, "<script"), 1u);

  MaybeScreenshot(Path("run.html"), "html_report", dir_);
}

// Syncs between launches in every step: the idle section says what
// followed them, in the words the text report uses.
TEST(HtmlReportIdleTest, SaysWhatFollowedTheSyncs) {
  using namespace diagnosis_sim;
  Sim sim(2);
  for (int i = 0; i < 6; ++i) {
    sim.BeginStep();
    for (int group = 0; group < 4; ++group) {
      for (int k = 0; k < 5; ++k) sim.Launch(4 * kUs, kCompute);
      sim.Sync();
      sim.Cpu(30 * kUs);
    }
    sim.EndStep();
  }
  StepAnalysis steps = sim.Analyze();
  const std::string drain = SyncDrainText(steps);
  ASSERT_NE(drain.find("3.0 syncs per step fell between its launches"), std::string::npos) << drain;
  std::ostringstream out;
  WriteHtmlReport(TraceSummary(), steps, Diagnose(steps), out);
  EXPECT_NE(out.str().find("<p>" + HtmlEscape(drain) + ".</p>"), std::string::npos);
}

TEST(HtmlReportIdleTest, SaysWhatTheAllocationCallsLeftIdleAndNamesTheChurn) {
  using namespace diagnosis_sim;
  Sim sim;
  for (int i = 0; i < 6; ++i) {
    sim.BeginStep();
    for (int block = 0; block < 4; ++block) sim.Free(50 * kUs);
    for (int k = 0; k < 20; ++k) {
      if (k % 5 == 0) sim.Malloc(20 * kUs);
      sim.Launch(100 * kUs, kCompute);
    }
    sim.EndStep();
  }
  StepAnalysis steps = sim.Analyze();
  const std::string drain = AllocationDrainText(steps);
  ASSERT_NE(drain.find("8.0 calls per step"), std::string::npos) << drain;
  std::ostringstream out;
  WriteHtmlReport(TraceSummary(), steps, Diagnose(steps), out);
  EXPECT_NE(out.str().find("<p>" + HtmlEscape(drain) + ".</p>"), std::string::npos);
  EXPECT_NE(out.str().find(HtmlEscape(BottleneckTitle(Bottleneck::kAllocatorChurn))), std::string::npos);
}

// Environments stepped in subprocesses, traced with the Python hook: the
// idle table and the OS-cost table name the job's worker processes, not
// data workers.
TEST(HtmlReportIdleTest, NamesWorkerProcessesThatAreNotADataLoaders) {
  StepAnalysis steps = diagnosis_sim::EnvironmentsInSubprocesses(/*hook=*/true, 6);
  ASSERT_TRUE(steps.WorkersAreNotADataLoaders());
  std::ostringstream out;
  WriteHtmlReport(TraceSummary(), steps, Diagnose(steps), out);
  EXPECT_NE(out.str().find(HtmlEscape(IdleCauseName(IdleCause::kWaitWorkerProcesses))), std::string::npos);
  EXPECT_NE(out.str().find(HtmlEscape("worker processes, not a DataLoader's (4)")), std::string::npos);
  EXPECT_EQ(out.str().find("data workers (4 processes)"), std::string::npos);
}

}  // namespace
}  // namespace gpuos
