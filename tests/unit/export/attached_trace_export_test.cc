// Reports and exports of attached recordings: the identity block's
// "attached:" and per-process CUDA lines, the JSON report's "attach" object
// (null for a launched trace), the CPU-side-only line of uprobe-only CUDA,
// the HTML page's attach box, the step report's account of unannotated
// steps, and the Perfetto export's "attach window" slice, held to
// PerfettoTraceChecker.  A launched trace gets none of it.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/cuda_summary.h"
#include "analysis/diagnosis.h"
#include "analysis/os_summary.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "export/report/cuda_report.h"
#include "export/report/html_report.h"
#include "export/report/json_writer.h"
#include "export/report/os_report.h"
#include "export/perfetto/perfetto_export.h"
#include "support/perfetto_trace_check.h"
#include "export/report/step_report.h"
#include "export/report/trace_identity.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "perfetto_trace.pb.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1'000'000'000;
// The header's clock pair: monotonic 1000 s is 1700000000 s since the epoch
// (2023-11-14 22:13:20 UTC).  The attach starts one second later.
constexpr uint64_t kClockMono = 1000 * kS;
constexpr uint64_t kClockReal = 1'700'000'000 * kS;
constexpr uint64_t kStart = kClockMono + kS;
constexpr uint64_t kEnd = kStart + 30 * kS;

v1::Event At(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

v1::Event Existing(uint64_t ts, uint32_t pid, uint32_t ppid, const std::string& comm) {
  v1::Event e = At(ts, pid, pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm(comm);
  e.mutable_process_start()->set_preexisting(true);
  return e;
}

v1::Event Api(uint64_t ts, uint32_t pid, const std::string& name, bool uprobe) {
  v1::Event e = At(ts, pid, pid);
  e.mutable_cuda_api()->set_name(name);
  e.mutable_cuda_api()->set_duration_ns(20'000);
  e.mutable_cuda_api()->set_from_uprobe(uprobe);
  return e;
}

v1::Event Kernel(uint64_t ts, uint32_t pid) {
  v1::Event e = At(ts, pid, 0);
  e.mutable_gpu_kernel()->set_name("gemm");
  e.mutable_gpu_kernel()->set_duration_ns(100'000);
  return e;
}

v1::TraceHeader Header(bool attached) {
  v1::TraceHeader h;
  h.set_hostname("node7");
  h.set_tracer_version("test");
  h.add_command_line("python3");
  h.add_command_line("train.py");
  h.mutable_start_clock()->set_monotonic_ns(kClockMono);
  h.mutable_start_clock()->set_realtime_ns(kClockReal);
  if (attached) {
    h.mutable_attach()->add_target_pids(4242);
    h.mutable_attach()->add_target_pids(4250);
    h.mutable_attach()->set_start_ns(kStart);
    h.mutable_attach()->set_requested_duration_ns(30 * kS);
  } else {
    h.set_root_pid(4242);
  }
  return h;
}

v1::TraceTrailer Trailer(bool attached) {
  v1::TraceTrailer t;
  t.mutable_end_clock()->set_monotonic_ns(kEnd + 5 * kMs);
  if (attached) {
    t.set_attach_end_ns(kEnd);
    v1::CudaAttachStatus* a = t.add_cuda_attach();
    a->set_pid(4242);
    a->set_mode("injected");
    a->set_detail("CUPTI from /usr/local/cuda/lib64");
    a->set_stopped_ns(3'100'000);
    a->set_kernels(51230);
    a = t.add_cuda_attach();
    a->set_pid(4250);
    a->set_mode("uprobes");
    a->set_detail("injection refused: ptrace not permitted");
  } else {
    t.set_root_exited(true);
  }
  return t;
}

std::vector<v1::Event> Events(bool uprobes_only) {
  std::vector<v1::Event> events = {Existing(kStart, 4242, 1, "python3"), Existing(kStart, 4250, 4242, "python3"),
                                   Existing(kStart, 4300, 1, "bash")};
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t t = kStart + kS + i * 100 * kMs;
    events.push_back(Api(t, 4242, uprobes_only ? "cuLaunchKernel" : "cudaLaunchKernel_v7000", uprobes_only));
    events.push_back(Api(t + 80 * kMs, 4242, uprobes_only ? "cuStreamSynchronize" : "cudaStreamSynchronize_v3020",
                         uprobes_only));
    if (!uprobes_only) events.push_back(Kernel(t + kMs, 4242));
  }
  return events;
}

TraceSummary Summarize(bool attached, bool uprobes_only = false) {
  OsSummaryBuilder os(Header(attached));
  CudaSummaryBuilder cuda;
  for (const v1::Event& e : Events(uprobes_only)) {
    os.Add(e);
    cuda.Add(e);
  }
  os.SetTrailer(Trailer(attached));
  return TraceSummary{os.Finish(), cuda.Finish()};
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(text, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return parsed;
}

const google::protobuf::Value& Get(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kMissing;
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing key " << key;
  return it == s.fields().end() ? kMissing : it->second;
}

std::string JsonReport(const TraceSummary& s) {
  std::ostringstream out;
  WriteOsJsonReport(s.os, out, [&](JsonWriter& json) { WriteCudaJsonMembers(s.cuda, json); });
  return out.str();
}

TEST(AttachReportTest, IdentityBlockSaysAttachedAndHowCudaWasRecorded) {
  std::ostringstream out;
  WriteOsTextReport(Summarize(true).os, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("  attached:  pids 4242 (python3 train.py), 4250 (python3) from 2023-11-14 22:13:21 UTC for "
                      "30.0 s (--duration 30s)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  cuda:      pid 4242: injected; stopped 3.100 ms; 51230 kernels; CUPTI from "
                      "/usr/local/cuda/lib64\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  cuda:      pid 4250: uprobes; CPU side of driver calls only; injection refused: ptrace not "
                      "permitted\n"),
            std::string::npos)
      << text;
  // The recording ran 5 ms past the window (the trailer's end clock).
  EXPECT_NE(text.find("  duration:  31.005 s of recording; events only within the 30.000 s attach window\n"),
            std::string::npos)
      << text;
  // No launch line; targets are starred as such.
  EXPECT_EQ(text.find("command:"), std::string::npos) << text;
  EXPECT_EQ(text.find("traced command"), std::string::npos) << text;
  EXPECT_NE(text.find("* = an attach target"), std::string::npos) << text;
  EXPECT_NE(text.find("4242*"), std::string::npos) << text;
  EXPECT_NE(text.find("4250*"), std::string::npos) << text;
  EXPECT_EQ(text.find("4300*"), std::string::npos) << text;
}

TEST(AttachReportTest, WithoutACleanEndTheWindowEndsAtTheLastEvent) {
  OsSummaryBuilder os(Header(true));
  for (const v1::Event& e : Events(false)) os.Add(e);
  OsSummary s = os.Finish();
  EXPECT_EQ(AttachStartNs(s), kStart);
  EXPECT_EQ(AttachEndNs(s), kStart + kS + 9 * 100 * kMs + 80 * kMs);
  EXPECT_NE(AttachText(s).find("for 2.0 s (--duration 30s, no clean end: up to the last event)"), std::string::npos)
      << AttachText(s);
}

TEST(AttachReportTest, JsonHasTheAttachObject) {
  google::protobuf::Struct j = ParseJson(JsonReport(Summarize(true)));
  const google::protobuf::Struct& a = Get(j, "attach").struct_value();
  ASSERT_EQ(Get(a, "target_pids").list_value().values_size(), 2);
  EXPECT_EQ(Get(a, "target_pids").list_value().values(0).number_value(), 4242);
  EXPECT_EQ(Get(a, "target_pids").list_value().values(1).number_value(), 4250);
  EXPECT_EQ(Get(a, "start_ns").number_value(), static_cast<double>(kStart));
  EXPECT_EQ(Get(a, "end_ns").number_value(), static_cast<double>(kEnd));
  EXPECT_EQ(Get(a, "duration_ns").number_value(), static_cast<double>(30 * kS));
  EXPECT_EQ(Get(a, "requested_duration_ns").number_value(), static_cast<double>(30 * kS));
  EXPECT_TRUE(Get(a, "clean_end").bool_value());
  const auto& cuda = Get(a, "cuda").list_value();
  ASSERT_EQ(cuda.values_size(), 2);
  const google::protobuf::Struct& c0 = cuda.values(0).struct_value();
  EXPECT_EQ(Get(c0, "pid").number_value(), 4242);
  EXPECT_EQ(Get(c0, "mode").string_value(), "injected");
  EXPECT_EQ(Get(c0, "detail").string_value(), "CUPTI from /usr/local/cuda/lib64");
  EXPECT_EQ(Get(c0, "stopped_ns").number_value(), 3'100'000);
  EXPECT_EQ(Get(c0, "kernels").number_value(), 51230);
  EXPECT_EQ(Get(cuda.values(1).struct_value(), "mode").string_value(), "uprobes");
  // The shim's GPU records are there: not CPU side only.
  EXPECT_FALSE(Get(Get(j, "cuda").struct_value(), "cpu_side_only").bool_value());
}

TEST(AttachReportTest, LaunchedTraceHasNothingAttachRelated) {
  const TraceSummary s = Summarize(false);
  std::ostringstream out;
  WriteOsTextReport(s.os, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("  command:   python3 train.py\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("attach"), std::string::npos) << text;
  EXPECT_NE(text.find("* = the traced command"), std::string::npos) << text;
  google::protobuf::Struct j = ParseJson(JsonReport(s));
  EXPECT_TRUE(Get(j, "attach").has_null_value());

  std::ostringstream html;
  StepAnalysis steps;
  WriteHtmlReport(s, steps, Diagnose(steps), html);
  EXPECT_EQ(html.str().find("id=\"attach\""), std::string::npos);
  EXPECT_EQ(html.str().find("Attached"), std::string::npos);
  EXPECT_EQ(html.str().find("cpu-side-only"), std::string::npos);
}

TEST(AttachReportTest, UprobeOnlyCudaSaysGpuTimingNeedsInjection) {
  const TraceSummary s = Summarize(true, /*uprobes_only=*/true);
  EXPECT_EQ(s.cuda.uprobe_api_calls, 20u);
  EXPECT_TRUE(s.cuda.cpu_side_only());
  std::ostringstream text;
  WriteCudaTextReport(s.cuda, text);
  EXPECT_NE(text.str().find("CUDA: CPU side only: the CUDA driver calls were recorded by eBPF uprobes"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("GPU-side timing (kernels, copies, GPU idle) needs the CUDA shim in the process"),
            std::string::npos);
  google::protobuf::Struct j = ParseJson(JsonReport(s));
  const google::protobuf::Struct& cuda = Get(j, "cuda").struct_value();
  EXPECT_TRUE(Get(cuda, "cpu_side_only").bool_value());
  EXPECT_EQ(Get(cuda, "uprobe_api_calls").number_value(), 20);
  EXPECT_NE(Get(cuda, "cpu_side_only_note").string_value().find("needs the CUDA shim"), std::string::npos);

  std::ostringstream html;
  StepAnalysis steps;
  WriteHtmlReport(s, steps, Diagnose(steps), html);
  EXPECT_NE(html.str().find("<div class=\"alert warn\" id=\"cpu-side-only\">CPU side only"), std::string::npos);

  // One GPU record is enough to have GPU-side timing; shim API calls without
  // GPU records are not uprobe calls.
  CudaSummaryBuilder with_kernel;
  for (const v1::Event& e : Events(true)) with_kernel.Add(e);
  with_kernel.Add(Kernel(kStart + 2 * kS, 4242));
  EXPECT_FALSE(with_kernel.Finish().cpu_side_only());
  CudaSummaryBuilder shim_calls;
  shim_calls.Add(Api(kStart + kS, 4242, "cudaLaunchKernel_v7000", false));
  EXPECT_FALSE(shim_calls.Finish().cpu_side_only());
  std::ostringstream quiet;
  WriteCudaTextReport(Summarize(true).cuda, quiet);
  EXPECT_EQ(quiet.str().find("CPU side only"), std::string::npos);
}

TEST(AttachReportTest, HtmlShowsTheAttachBox) {
  const TraceSummary s = Summarize(true);
  std::ostringstream html;
  StepAnalysis steps;
  WriteHtmlReport(s, steps, Diagnose(steps), html);
  const std::string page = html.str();
  EXPECT_NE(page.find("<div class=\"alert warn\" id=\"attach\"><b>Attached</b> to pids 4242 (python3 train.py), 4250 "
                      "(python3) from 2023-11-14 22:13:21 UTC for 30.0 s (--duration 30s).<ul><li>CUDA pid 4242: "
                      "injected; stopped 3.100 ms; 51230 kernels;"),
            std::string::npos)
      << page.substr(0, 4000);
  EXPECT_NE(page.find("<li>CUDA pid 4250: uprobes;"), std::string::npos);
  EXPECT_NE(page.find("<dt>attach window</dt><dd>30.000 s</dd>"), std::string::npos);
  EXPECT_NE(page.find("* = an attach target"), std::string::npos);
}

TEST(AttachReportTest, StepReportSaysHowUnannotatedStepsWereFound) {
  // The attached trace's API calls: a launch and a sync every 100 ms on pid
  // 4242, a repeating sequence.
  std::vector<v1::Event> events = Events(false);
  auto a = AnalyzeStepEvents(Header(true), events, StepOptions());
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->source, StepSource::kRepeatingKernelSequence) << a->note;
  EXPECT_EQ(a->steps.size(), 9u);
  std::ostringstream text;
  const Diagnosis d = Diagnose(*a);
  WriteStepTextReport(*a, d, text);
  EXPECT_NE(
      text.str().find("9 steps of thread 4242 \"python3\" (pid 4242), from the repeating sequence of GPU work"),
      std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("  how: no NVTX step ranges"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("a step starts before \"cudaStreamSynchronize\""), std::string::npos) << text.str();
  std::ostringstream json;
  {
    JsonWriter w(json);
    w.BeginObject();
    WriteStepJsonMembers(*a, d, w);
    w.EndObject();
  }
  google::protobuf::Struct j = ParseJson(json.str());
  const google::protobuf::Struct& sa = Get(j, "step_analysis").struct_value();
  EXPECT_EQ(Get(sa, "source").string_value(), "repeating_kernel_sequence");
  EXPECT_EQ(Get(sa, "anchor").string_value(), "cudaStreamSynchronize");
  EXPECT_EQ(Get(sa, "note").string_value(), a->note);

  // Three launches and no syncs: too few calls for a rhythm, so fixed
  // windows over the attach window [kStart, kEnd).
  std::vector<v1::Event> launches;
  int kept = 0;
  for (const v1::Event& e : events) {
    if (!e.has_cuda_api() || (e.cuda_api().name().find("Launch") != std::string::npos && kept++ < 3)) {
      launches.push_back(e);
    }
  }
  const v1::TraceTrailer trailer = Trailer(true);
  a = AnalyzeStepEvents(Header(true), launches, StepOptions(), &trailer);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->source, StepSource::kFixedWindows) << a->note;
  EXPECT_EQ(a->steps.size(), 300u);
  EXPECT_EQ(a->steps.front().start_ns, kStart);
  EXPECT_EQ(a->steps.back().end_ns, kEnd);
  std::ostringstream windows;
  WriteStepTextReport(*a, Diagnose(*a), windows);
  EXPECT_NE(windows.str().find("from fixed time windows"), std::string::npos) << windows.str();
  EXPECT_NE(windows.str().find("fixed windows of 100.000 ms over the attach window"), std::string::npos)
      << windows.str();
  std::ostringstream page;
  WriteHtmlReport(Summarize(true), *a, Diagnose(*a), page);
  EXPECT_NE(page.str().find("<p class=\"note\" id=\"step-source\">no NVTX step ranges"), std::string::npos);
}

// ---- Perfetto -----------------------------------------------------------------

class AttachExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/export_attach_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    unlink((dir_ + "/in.gpuos").c_str());
    unlink((dir_ + "/out.pftrace").c_str());
    rmdir(dir_.c_str());
  }

  // Writes and exports a trace; returns the checked, parsed output.
  perfetto::protos::Trace Export(bool attached, bool with_trailer) {
    const std::string in = dir_ + "/in.gpuos";
    const std::string out = dir_ + "/out.pftrace";
    {
      auto writer = TraceWriter::Create(in);
      EXPECT_TRUE(writer.ok()) << writer.status();
      EXPECT_TRUE((*writer)->WriteHeader(Header(attached)).ok());
      for (const v1::Event& e : Events(false)) EXPECT_TRUE((*writer)->Append(e).ok());
      if (with_trailer) {
        EXPECT_TRUE((*writer)->WriteTrailer(Trailer(attached)).ok());
      }
      EXPECT_TRUE((*writer)->Close().ok());
    }
    ExportOptions options;
    options.temp_dir = dir_;
    auto summary = ExportTrace(in, out, options);
    EXPECT_TRUE(summary.ok()) << summary.status();
    auto check = CheckPerfettoTraceFile(out);
    EXPECT_TRUE(check.ok()) << check.status();
    if (check.ok()) {
      EXPECT_TRUE(check->ok()) << ::testing::PrintToString(check->violations);
      check_ = *check;
    }
    std::ifstream file(out, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    perfetto::protos::Trace trace;
    EXPECT_TRUE(trace.ParseFromString(bytes));
    return trace;
  }

  // The begin and end times of the slices on the track named `name`.
  static std::vector<std::pair<uint64_t, uint64_t>> SlicesOn(const perfetto::protos::Trace& trace,
                                                             const std::string& name, bool* root) {
    uint64_t uuid = 0;
    for (const auto& packet : trace.packet()) {
      if (packet.has_track_descriptor() && packet.track_descriptor().name() == name) {
        uuid = packet.track_descriptor().uuid();
        *root = packet.track_descriptor().parent_uuid() == 0;
      }
    }
    std::vector<std::pair<uint64_t, uint64_t>> slices;
    if (uuid == 0) return slices;
    for (const auto& packet : trace.packet()) {
      if (!packet.has_track_event() || packet.track_event().track_uuid() != uuid) continue;
      if (packet.track_event().type() == perfetto::protos::TrackEvent::TYPE_SLICE_BEGIN) {
        slices.push_back({packet.timestamp(), 0});
      } else if (packet.track_event().type() == perfetto::protos::TrackEvent::TYPE_SLICE_END && !slices.empty()) {
        slices.back().second = packet.timestamp();
      }
    }
    return slices;
  }

  std::string dir_;
  PerfettoTraceCheck check_;
};

TEST_F(AttachExportTest, AttachWindowIsASliceOnAGlobalTrack) {
  perfetto::protos::Trace trace = Export(true, true);
  bool root = false;
  auto slices = SlicesOn(trace, "attach window", &root);
  EXPECT_TRUE(root);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].first, kStart);
  EXPECT_EQ(slices[0].second, kEnd);
  EXPECT_EQ(check_.events_by_name["attach window"], 1u);

  // Killed mid-recording: the window closes at the last event.
  trace = Export(true, false);
  slices = SlicesOn(trace, "attach window", &root);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].second, kStart + kS + 9 * 100 * kMs + 80 * kMs);
}

TEST_F(AttachExportTest, LaunchedTraceHasNoAttachWindow) {
  perfetto::protos::Trace trace = Export(false, true);
  bool root = false;
  EXPECT_TRUE(SlicesOn(trace, "attach window", &root).empty());
  EXPECT_EQ(check_.events_by_name.count("attach window"), 0u);
  EXPECT_GT(check_.slices, 0u);
}

}  // namespace
}  // namespace gpuos
