// Block I/O in the analysis and the reports, on constructed event streams:
// per-thread totals in the OS summary (text, JSON, HTML); "waiting for
// disk" where the driving thread was blocked while its own requests were
// in flight (reads: data loading; writes: OS overhead; never a futex wait,
// never another thread's requests); a data worker blocked on its own reads
// while the driving thread waited on it: the chain's last thread is
// "disk", and that part of data loading is the disk's.  A stream without
// BlockIo events reads as before.
#include <sstream>
#include <string>
#include <vector>

#include "analysis/diagnosis.h"
#include "analysis/os_summary.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "export/report/html_report.h"
#include "export/report/json_writer.h"
#include "export/report/os_report.h"
#include "export/report/step_report.h"
#include "export/report/wait_chain_text.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/event_builders.h"

namespace gpuos {
namespace {

constexpr uint32_t kPid = 10;
constexpr uint32_t kMain = 10;
constexpr uint32_t kHelper = 13;  // another thread of the job
constexpr uint64_t kStep = 1000;
constexpr int kSteps = 4;
constexpr int32_t kReadNr = 0;
constexpr int32_t kFutexNr = 202;

using test_events::Ev;
using test_events::Process;
using test_events::Thread;

v1::Event StepRange(int k) {
  v1::Event e = Ev(k * kStep, kPid, kMain);
  e.mutable_nvtx_range()->set_duration_ns(kStep);
  e.mutable_nvtx_range()->set_name("step " + std::to_string(k));
  return e;
}

v1::Event Kernel(uint64_t start, uint64_t end) {
  v1::Event e = Ev(start, kPid, 0);
  e.mutable_gpu_kernel()->set_duration_ns(end - start);
  e.mutable_gpu_kernel()->set_name("k");
  return e;
}

// Off the CPU over [start, end), woken at `end` by `waker` (0: none known).
v1::Event Off(uint32_t pid, uint32_t tid, uint64_t start, uint64_t end, v1::OffCpuCause cause, uint32_t waker = 0,
              uint32_t waker_pid = 0) {
  v1::Event e = Ev(start, pid, tid);
  v1::OffCpu* off = e.mutable_off_cpu();
  off->set_duration_ns(end - start);
  off->set_runqueue_ns(cause == v1::OFF_CPU_CAUSE_PREEMPTED ? end - start : 0);
  off->set_cause(cause);
  off->set_syscall_nr(cause == v1::OFF_CPU_CAUSE_FUTEX ? kFutexNr : cause == v1::OFF_CPU_CAUSE_SYSCALL ? kReadNr : -1);
  off->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
  off->set_woken_by_tid(waker);
  off->set_waker_pid(waker_pid);
  off->set_waker_context_known(true);
  return e;
}

// A block I/O request `tid` issued at `start`, completed at `end`.
v1::Event BlockIo(uint32_t pid, uint32_t tid, uint64_t start, uint64_t end, const std::string& rwbs,
                  uint32_t bytes = 4096) {
  v1::Event e = Ev(start, pid, tid);
  v1::BlockIo* io = e.mutable_block_io();
  io->set_duration_ns(end - start);
  io->set_dev((259u << 20) | 0);
  io->set_dev_name("nvme0n1");
  io->set_sector(2048);
  io->set_bytes(bytes);
  io->set_rwbs(rwbs);
  return e;
}

StepOptions Options() {
  StepOptions o;
  o.warmup_steps = 0;
  return o;
}

size_t C(IdleCause c) { return static_cast<size_t>(c); }
size_t S(Stage s) { return static_cast<size_t>(s); }

StepAnalysis Analyze(const std::vector<v1::Event>& events) {
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, Options());
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : StepAnalysis();
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct j;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &j).ok()) << text;
  return j;
}

google::protobuf::Struct StepJson(const StepAnalysis& a) {
  std::ostringstream text;
  JsonWriter json(text);
  json.BeginObject();
  WriteStepJsonMembers(a, Diagnose(a), json);
  json.EndObject();
  return ParseJson(text.str());
}

std::string StepText(const StepAnalysis& a) {
  std::ostringstream out;
  WriteStepTextReport(a, Diagnose(a), out);
  return out.str();
}

const google::protobuf::Value& At(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kMissing;
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << key;
  return it == s.fields().end() ? kMissing : it->second;
}

// ---- The driving thread blocked on its own block I/O ----------------------

// Each step: on the CPU to 100, blocked in a syscall (`cause`) from 100 to
// 600, with `rwbs` requests of `issuer` in flight from 120 to 580; then a
// kernel to 900.
std::vector<v1::Event> ReadingSteps(v1::OffCpuCause cause, const std::string& rwbs, uint32_t issuer = kMain) {
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kHelper, "python3")};
  for (int k = 0; k < kSteps; ++k) {
    const uint64_t t = k * kStep;
    ev.push_back(StepRange(k));
    ev.push_back(Off(kPid, kMain, t + 100, t + 600, cause));
    if (!rwbs.empty()) ev.push_back(BlockIo(kPid, issuer, t + 120, t + 580, rwbs));
    ev.push_back(Kernel(t + 600, t + 900));
  }
  return ev;
}

TEST(BlockIoAnalysisTest, TheDrivingThreadBlockedOnItsOwnReadsWaitsForDiskAsDataLoading) {
  const StepAnalysis a = Analyze(ReadingSteps(v1::OFF_CPU_CAUSE_SYSCALL, "R"));
  ASSERT_EQ(a.measured_steps, static_cast<size_t>(kSteps));
  const StepRecord& t = a.measured_total;
  // 120..580 with the read in flight; 100..120 and 580..600 blocked
  // without it; 0..100 and 900..1000 on the CPU.
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)], kSteps * 460u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskWrite)], 0u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kOtherSyscalls)], kSteps * 40u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kOtherCpu)], kSteps * 200u);
  EXPECT_EQ(t.stages[S(Stage::kDataLoading)], kSteps * 460u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], kSteps * 40u);
  EXPECT_EQ(DiskPartOfStages(t)[S(Stage::kDataLoading)], kSteps * 460u);
  EXPECT_EQ(t.off_cpu.syscall_ns, kSteps * 500u);
  EXPECT_EQ(t.off_cpu.disk_ns, kSteps * 460u);
  EXPECT_EQ(t.os.block_io_launching.requests, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(t.os.block_io_launching.bytes, kSteps * 4096u);
  EXPECT_EQ(t.os.block_io_launching.ns, kSteps * 460u);
  EXPECT_EQ(t.os.block_io_others.requests, 0u);
  for (const StepRecord& s : a.steps) {
    uint64_t stages = 0;
    for (uint64_t v : s.stages) stages += v;
    EXPECT_EQ(stages, s.duration_ns());
  }

  const google::protobuf::Struct j = StepJson(a);
  const auto& causes = At(At(j, "gpu_idle_attribution").struct_value(), "causes").list_value();
  bool found = false;
  for (const auto& c : causes.values()) {
    if (At(c.struct_value(), "cause").string_value() != "disk_read") continue;
    found = true;
    EXPECT_EQ(At(c.struct_value(), "ns").number_value(), kSteps * 460.0);
    EXPECT_EQ(At(c.struct_value(), "name").string_value(), "waiting for disk (reads)");
  }
  EXPECT_TRUE(found);
  const auto& stages = At(At(j, "stage_summary").struct_value(), "stages").list_value();
  EXPECT_EQ(At(stages.values(S(Stage::kDataLoading)).struct_value(), "waiting_for_disk_ns").number_value(),
            kSteps * 460.0);
  const auto& step0 = At(j, "steps").list_value().values(0).struct_value();
  EXPECT_EQ(At(At(step0, "breakdown").struct_value(), "off_cpu_disk").number_value(), 460);
  EXPECT_EQ(At(At(At(step0, "os").struct_value(), "block_io_launching_thread").struct_value(), "requests")
                .number_value(),
            1);
  EXPECT_EQ(At(At(step0, "stages_waiting_for_disk").struct_value(), "data_loading").number_value(), 460);

  const std::string text = StepText(a);
  EXPECT_NE(text.find("waiting for disk (reads)"), std::string::npos) << text;
  EXPECT_NE(text.find("waiting for disk (the driving thread's own block I/O"), std::string::npos) << text;
  EXPECT_NE(text.find("block I/O issued per step: launching thread 1.0 requests"), std::string::npos) << text;
}

TEST(BlockIoAnalysisTest, WritesOfTheDrivingThreadAreDiskWaitsOfTheOsNotDataLoading) {
  const StepAnalysis a = Analyze(ReadingSteps(v1::OFF_CPU_CAUSE_SYSCALL, "WS"));
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskWrite)], kSteps * 460u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kDataLoading)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], kSteps * 500u);
  EXPECT_EQ(DiskPartOfStages(t)[S(Stage::kOsOverhead)], kSteps * 460u);
}

TEST(BlockIoAnalysisTest, ABlockedPageFaultWithItsOwnReadInFlightWaitsForDisk) {
  const StepAnalysis a = Analyze(ReadingSteps(v1::OFF_CPU_CAUSE_PAGE_FAULT, "RA"));
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)], kSteps * 460u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kPageFaults)], kSteps * 40u);
  EXPECT_EQ(t.off_cpu.disk_ns, kSteps * 460u);
}

TEST(BlockIoAnalysisTest, AFutexWaitOrAnotherThreadsRequestsAreNoDiskWait) {
  for (bool futex : {true, false}) {
    SCOPED_TRACE(futex ? "futex wait, own request in flight" : "read blocked, another thread's request");
    const StepAnalysis a = futex ? Analyze(ReadingSteps(v1::OFF_CPU_CAUSE_FUTEX, "R"))
                                 : Analyze(ReadingSteps(v1::OFF_CPU_CAUSE_SYSCALL, "R", kHelper));
    const StepRecord& t = a.measured_total;
    EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)], 0u);
    EXPECT_EQ(t.gpu_idle[C(futex ? IdleCause::kFutexOther : IdleCause::kOtherSyscalls)], kSteps * 500u);
    EXPECT_EQ(t.off_cpu.disk_ns, 0u);
    const StageTimes disk = DiskPartOfStages(t);
    for (uint64_t v : disk) EXPECT_EQ(v, 0u);
    // The requests still count, for their issuer's role.
    EXPECT_EQ((futex ? t.os.block_io_launching : t.os.block_io_others).requests, static_cast<uint64_t>(kSteps));
  }
}

// Without BlockIo events: the same stream reads as before the block I/O
// source existed -- the blocked read is "other syscalls" (OS overhead), no
// disk anywhere, and the text reports say nothing about block I/O.
TEST(BlockIoAnalysisTest, AStreamWithoutBlockIoReadsAsBefore) {
  const std::vector<v1::Event> events = ReadingSteps(v1::OFF_CPU_CAUSE_SYSCALL, "");
  const StepAnalysis a = Analyze(events);
  const StepRecord& t = a.measured_total;
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kOtherSyscalls)], kSteps * 500u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kOtherCpu)], kSteps * 200u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)] + t.gpu_idle[C(IdleCause::kDiskWrite)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kOsOverhead)], kSteps * 500u);
  EXPECT_EQ(t.stages[S(Stage::kDataLoading)], 0u);
  EXPECT_EQ(t.off_cpu.disk_ns, 0u);
  const std::string text = StepText(a);
  EXPECT_EQ(text.find("disk"), std::string::npos) << text;
  EXPECT_EQ(text.find("block I/O"), std::string::npos) << text;

  OsSummaryBuilder builder{v1::TraceHeader()};
  for (const v1::Event& e : events) builder.Add(e);
  const OsSummary os = builder.Finish();
  std::ostringstream os_text;
  WriteOsTextReport(os, os_text);
  EXPECT_EQ(os_text.str().find("Block I/O"), std::string::npos) << os_text.str();
  std::ostringstream html;
  TraceSummary summary;
  summary.os = os;
  WriteHtmlReport(summary, a, Diagnose(a), html);
  EXPECT_EQ(html.str().find("id=\"block-io\""), std::string::npos);
  EXPECT_EQ(html.str().find("id=\"step-block-io\""), std::string::npos);
  EXPECT_EQ(html.str().find("id=\"stage-disk\""), std::string::npos);
}

// ---- A data worker blocked on its own reads --------------------------------

// The DataLoader of wakeup_chain_test (the main thread waits 100..700 in
// futex; the pin-memory thread 12, woken by the worker at 600, wakes it),
// where the worker (20 or 21) was blocked reading its samples 150..350 with
// its own read in flight 160..310.
std::vector<v1::Event> WorkerReadingSteps() {
  constexpr uint32_t kPin = 12;
  std::vector<v1::Event> ev = {Process(kPid, 1, "python3"), Thread(kPid, kPin, "python3"),
                               Process(20, kPid, "python3"), Process(21, kPid, "python3")};
  for (int k = 0; k < kSteps; ++k) {
    const uint64_t t = k * kStep;
    const uint32_t worker = k % 2 ? 21 : 20;
    ev.push_back(StepRange(k));
    ev.push_back(Off(kPid, kMain, t + 100, t + 700, v1::OFF_CPU_CAUSE_FUTEX, kPin, kPid));
    ev.push_back(Off(kPid, kPin, t + 50, t + 600, v1::OFF_CPU_CAUSE_FUTEX, worker, worker));
    ev.push_back(Off(worker, worker, t + 150, t + 350, v1::OFF_CPU_CAUSE_SYSCALL));
    ev.push_back(BlockIo(worker, worker, t + 160, t + 310, "R", 65536));
    ev.push_back(Off(worker, worker, t + 400, t + 430, v1::OFF_CPU_CAUSE_PREEMPTED));
    ev.push_back(Off(worker, worker, t + 600, t + kStep + 50, v1::OFF_CPU_CAUSE_FUTEX, kMain, kPid));
    ev.push_back(Kernel(t + 700, t + 900));
  }
  return ev;
}

TEST(BlockIoAnalysisTest, WaitingOnAWorkerThatWaitsForDiskIsDataLoadingFromDisk) {
  const StepAnalysis a = Analyze(WorkerReadingSteps());
  const StepRecord& t = a.measured_total;
  // The driving thread's own cause is unchanged: it waited for data.
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDataWaitFutex)], kSteps * 600u);
  EXPECT_EQ(t.gpu_idle[C(IdleCause::kDiskRead)], 0u);
  EXPECT_EQ(t.stages[S(Stage::kDataLoading)], kSteps * 600u);
  HopStates worker{};
  for (const WaitVia& v : t.via) {
    if (!v.last) continue;
    EXPECT_TRUE(v.tid == 20 || v.tid == 21) << v.tid;
    for (size_t i = 0; i < kHopStateCount; ++i) worker[i] += v.states[i];
  }
  // Over each 600 ns wait: blocked 150..350 (150 with its read in flight,
  // 50 without), preempted 30, in futex 100 after handing the batch over,
  // running the rest.
  EXPECT_EQ(worker[static_cast<size_t>(HopState::kDisk)], kSteps * 150u);
  EXPECT_EQ(worker[static_cast<size_t>(HopState::kIo)], kSteps * 50u);
  EXPECT_EQ(worker[static_cast<size_t>(HopState::kPreempted)], kSteps * 30u);
  EXPECT_EQ(worker[static_cast<size_t>(HopState::kFutex)], kSteps * 100u);
  EXPECT_EQ(worker[static_cast<size_t>(HopState::kRunning)], kSteps * 270u);
  EXPECT_EQ(DiskPartOfStages(t)[S(Stage::kDataLoading)], kSteps * 150u);
  EXPECT_EQ(t.os.block_io_workers.requests, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(t.os.block_io_workers.bytes, kSteps * 65536u);

  const std::string chain = WaitChainText(a, IdleCause::kDataWaitFutex);
  EXPECT_NE(chain.find("waiting for disk (its own block I/O) 25%"), std::string::npos) << chain;
  const google::protobuf::Struct j = StepJson(a);
  bool disk_state = false;
  for (const auto& c : At(At(j, "gpu_idle_attribution").struct_value(), "causes").list_value().values()) {
    if (At(c.struct_value(), "cause").string_value() != "data_wait_futex") continue;
    for (const auto& v : At(c.struct_value(), "via").list_value().values()) {
      if (!At(v.struct_value(), "last").bool_value()) continue;
      const auto& states = At(v.struct_value(), "state_ns").struct_value();
      EXPECT_TRUE(states.fields().contains("io"));
      disk_state |= At(states, "disk").number_value() > 0;
    }
  }
  EXPECT_TRUE(disk_state);
  const auto& stages = At(At(j, "stage_summary").struct_value(), "stages").list_value();
  EXPECT_EQ(At(stages.values(S(Stage::kDataLoading)).struct_value(), "waiting_for_disk_ns").number_value(),
            kSteps * 150.0);
  const std::string text = StepText(a);
  EXPECT_NE(text.find("data loading 0.001 ms (25.0% of the stage)"), std::string::npos) << text;
}

// ---- Per-thread totals in the OS summary -----------------------------------

std::vector<v1::Event> OsEvents() {
  return {Process(kPid, 1, "python3"),
          Thread(kPid, kHelper, "loader"),
          BlockIo(kPid, kMain, 100, 300, "R", 4096),
          BlockIo(kPid, kMain, 150, 450, "R", 8192),
          BlockIo(kPid, kHelper, 200, 1200, "WS", 1 << 20),
          // Issued later by the kernel for no thread it recorded.
          BlockIo(0, 0, 500, 600, "W", 512)};
}

TEST(BlockIoAnalysisTest, OsSummaryCountsEachThreadsRequests) {
  OsSummaryBuilder builder{v1::TraceHeader()};
  for (const v1::Event& e : OsEvents()) builder.Add(e);
  const OsSummary s = builder.Finish();
  ASSERT_EQ(s.processes.size(), 1u) << "pid 0 is no process";
  const ProcessSummary& p = s.processes[0];
  ASSERT_EQ(p.threads.size(), 2u);
  EXPECT_EQ(p.threads[0].block_io.requests, 2u);
  EXPECT_EQ(p.threads[0].block_io.bytes, 12288u);
  EXPECT_EQ(p.threads[0].block_io.total_ns, 500u);
  EXPECT_EQ(p.threads[1].block_io.requests, 1u);
  EXPECT_EQ(p.threads[1].block_io.bytes, 1u << 20);
  EXPECT_EQ(p.threads[1].block_io.total_ns, 1000u);
  EXPECT_EQ(s.block_io.requests, 4u);
  EXPECT_EQ(s.block_io_unattributed.requests, 1u);
  EXPECT_EQ(s.block_io_unattributed.bytes, 512u);

  std::ostringstream json_text;
  WriteOsJsonReport(s, json_text);
  const google::protobuf::Struct j = ParseJson(json_text.str());
  const auto& process = At(j, "processes").list_value().values(0).struct_value();
  const auto& main = At(process, "threads").list_value().values(0).struct_value();
  const auto& io = At(main, "block_io").struct_value();
  EXPECT_EQ(At(io, "requests").number_value(), 2);
  EXPECT_EQ(At(io, "bytes").number_value(), 12288);
  EXPECT_EQ(At(io, "total_ns").number_value(), 500);
  EXPECT_EQ(At(At(At(process, "totals").struct_value(), "block_io").struct_value(), "requests").number_value(), 3);
  const auto& all = At(j, "block_io").struct_value();
  EXPECT_EQ(At(all, "requests").number_value(), 4);
  EXPECT_EQ(At(At(all, "unattributed").struct_value(), "requests").number_value(), 1);

  std::ostringstream text;
  WriteOsTextReport(s, text);
  EXPECT_NE(text.str().find("Block I/O (4 requests, 1.0 MiB"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("loader"), std::string::npos);
  EXPECT_NE(text.str().find("(issued for no known thread)"), std::string::npos) << text.str();

  std::ostringstream html;
  TraceSummary summary;
  summary.os = s;
  WriteHtmlReport(summary, StepAnalysis(), Diagnose(StepAnalysis()), html);
  EXPECT_NE(html.str().find("id=\"block-io\""), std::string::npos);
  EXPECT_NE(html.str().find("Block I/O by issuing thread (4 requests"), std::string::npos);
}

}  // namespace
}  // namespace gpuos
