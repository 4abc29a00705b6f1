// Wakeup chains on a real data-bound job, on the CPU as CI can run it: the
// LibTorch trainer with two worker processes that spend most of each batch
// preprocessing (--preprocess-us), traced launched and attached (--pid).
// The driving thread must be the training loop's thread (the trainer's
// main thread) both ways, its waits for batches must be charged to data
// loading through the worker processes that ended them, and those workers
// must be found busy during the waits (preprocessing: on the CPU, or
// preempted by the machine's other work), not blocked.  Needs root and a trainer built against Debian's
// LibTorch; skipped otherwise.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/data_pipeline_bound.h"
#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "export/report/wait_chain_text.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

const std::string kTrainer = GPUOS_TRAINER_BIN;

std::vector<std::string> TrainerArgs(int steps) {
  return {kTrainer, "--device", "cpu", "--model", "tiny", "--steps", absl::StrCat(steps), "--warmup", "2",
          "--batch-size", "8", "--workers", "2", "--preprocess-us", "1500", "--threads", "1"};
}

struct DataChain {
  uint64_t data_idle_ns = 0;     // GPU-idle time charged to waiting for data
  uint64_t via_worker_ns = 0;    // of it, waits a data worker ended (hop 0)
  HopStates worker_states{};     // what those workers did meanwhile
  std::string text;
};

DataChain DataChainOf(const StepAnalysis& a) {
  DataChain d;
  for (IdleCause c : {IdleCause::kDataWaitFutex, IdleCause::kDataWaitBlocked}) {
    d.data_idle_ns += a.measured_total.gpu_idle[static_cast<size_t>(c)];
    const std::string text = WaitChainText(a, c);
    if (!text.empty()) absl::StrAppend(&d.text, IdleCauseName(c), ": ", text, "\n");
  }
  for (const WaitVia& v : a.measured_total.via) {
    if (!IsDataWait(v.cause) || v.hop != 0) continue;
    auto info = a.threads.find(v.tid);
    if (info == a.threads.end() || info->second.role != ThreadRole::kDataWorker) continue;
    d.via_worker_ns += v.ns;
    for (size_t i = 0; i < kHopStateCount; ++i) d.worker_states[i] += v.states[i];
  }
  return d;
}

void ExpectDataChain(const StepAnalysis& a, uint32_t trainer_pid) {
  SCOPED_TRACE(a.driving_thread_note);
  ASSERT_TRUE(a.has_steps()) << a.note;
  EXPECT_EQ(a.pid, trainer_pid);
  EXPECT_EQ(a.tid, trainer_pid) << "the training loop runs on the trainer's main thread";
  const DataChain d = DataChainOf(a);
  SCOPED_TRACE(d.text);
  EXPECT_GT(d.data_idle_ns, a.measured_wall_ns / 3) << "the job is data-bound";
  EXPECT_GT(d.via_worker_ns, d.data_idle_ns / 2) << "most data waits were ended by a worker";
  // Preprocessing: on the CPU, or runnable and waiting for one (on a
  // busy machine, CI's included, the two workers share the CPUs with
  // everything else), not blocked.
  auto share = [&](HopState s) {
    return static_cast<double>(d.worker_states[static_cast<size_t>(s)]) /
           static_cast<double>(std::max<uint64_t>(d.via_worker_ns, 1));
  };
  EXPECT_GT(share(HopState::kRunning), 0.05);
  EXPECT_GT(share(HopState::kRunning) + share(HopState::kPreempted) + share(HopState::kRunqueue), 0.7)
      << "the workers were preprocessing";
  EXPECT_NE(d.text.find("data worker"), std::string::npos);
  EXPECT_NE(d.text.find("gpuos-data-"), std::string::npos);
}

bool TrainerUsable() { return geteuid() == 0 && access(kTrainer.c_str(), X_OK) == 0; }

TEST(WakeupChainTrace, LaunchedDataWaitsGoThroughTheWorkers) {
  if (!TrainerUsable()) GTEST_SKIP() << "needs root and gpuos-trainer (LibTorch)";
  rt::TempDir dir;
  const std::string trace = dir.File("launched.gpuos");
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace, "--"};
  for (std::string& a : TrainerArgs(16)) argv.push_back(std::move(a));
  rt::RunOptions options;
  options.timeout_s = 120;
  rt::RunResult run = rt::Run(argv, options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();

  auto contents = rt::ReadTrace(trace);
  ASSERT_TRUE(contents.ok()) << contents.status();
  uint32_t root = 0;
  for (const v1::Event& e : contents->events) {
    if (e.has_process_start() && e.process_start().is_root()) root = e.pid();
  }
  ASSERT_NE(root, 0u);
  StepOptions step_options;
  step_options.warmup_steps = 2;
  auto a = AnalyzeSteps(trace, step_options);
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectDataChain(*a, root);

  // The JSON report carries the chain.
  rt::RunResult report = rt::Run({rt::TracerPath(), "report", trace, "--format", "json"});
  ASSERT_EQ(report.exit_code, 0) << report.Describe();
  EXPECT_NE(report.out.find("\"via\""), std::string::npos);
  EXPECT_NE(report.out.find("data_worker"), std::string::npos);
  EXPECT_NE(report.out.find("\"state_ns\""), std::string::npos);
}

TEST(WakeupChainTrace, AttachedTheDrivingThreadIsStillTheLoopsThread) {
  if (!TrainerUsable()) GTEST_SKIP() << "needs root and gpuos-trainer (LibTorch)";
  rt::TempDir dir;
  const std::string trace = dir.File("attached.gpuos");
  rt::Child trainer = rt::Child::Start(TrainerArgs(100000));
  // Past start-up and the workers' first batches.
  ASSERT_TRUE(rt::WaitUntil([&] { return rt::ChildrenOf(trainer.pid()).size() >= 2; }, 30));
  usleep(1500 * 1000);
  rt::RunOptions options;
  options.timeout_s = 60;
  rt::RunResult run = rt::Run(
      {rt::TracerPath(), "-q", "-o", trace, "--pid", absl::StrCat(trainer.pid()), "--duration", "3s"}, options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  trainer.Signal(SIGTERM);
  trainer.Wait(30);

  StepOptions step_options;
  step_options.warmup_steps = 0;
  auto a = AnalyzeSteps(trace, step_options);
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectDataChain(*a, static_cast<uint32_t>(trainer.pid()));
}

// The same job reading each sample from storage the page cache does not
// hold (O_DIRECT, --read-direct) instead of preprocessing it: the workers
// the loop waits for are found waiting for their own block I/O, and the
// diagnosis says storage sets the pace rather than asking for more workers.
TEST(WakeupChainTrace, WorkersReadingFromDiskMakeAStorageBoundPipeline) {
  if (!TrainerUsable()) GTEST_SKIP() << "needs root and gpuos-trainer (LibTorch)";
  rt::TempDir dir;
  const std::string samples = dir.File("samples.bin");
  {
    // 64 MiB of samples; O_DIRECT reads never come from the page cache.
    std::string chunk(1 << 20, 'x');
    FILE* f = fopen(samples.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(fwrite(chunk.data(), 1, chunk.size(), f), chunk.size());
    // On disk and out of the page cache, as a data set written long
    // before: a direct read of dirty pages would first wait for their
    // writeback, the flusher's requests and not the reader's.
    ASSERT_EQ(fflush(f), 0);
    ASSERT_EQ(fsync(fileno(f)), 0);
    posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
    ASSERT_EQ(fclose(f), 0);
  }
  const std::string trace = dir.File("disk.gpuos");
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace, "--", kTrainer, "--device", "cpu",
                                   "--model", "tiny", "--steps", "40", "--warmup", "2", "--batch-size", "8",
                                   "--workers", "2", "--threads", "1", "--read-direct", samples, "--read-kib",
                                   "512"};
  rt::RunOptions options;
  options.timeout_s = 120;
  rt::RunResult run = rt::Run(argv, options);
  if (run.err.find("cannot open with O_DIRECT") != std::string::npos) {
    GTEST_SKIP() << "the temporary directory's file system takes no O_DIRECT";
  }
  ASSERT_EQ(run.exit_code, 0) << run.Describe();

  StepOptions step_options;
  step_options.warmup_steps = 2;
  auto a = AnalyzeSteps(trace, step_options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_steps()) << a->note;
  const DataChain d = DataChainOf(*a);
  SCOPED_TRACE(d.text);
  EXPECT_GT(d.data_idle_ns, a->measured_wall_ns / 2) << "the job is data-bound";
  const DataPipelineBound b = FindDataPipelineBound(*a);
  EXPECT_EQ(b.Limit(), DataPipelineLimit::kDisk)
      << "cpu " << b.cpu_ns << " disk " << b.disk_ns << " cpu wait " << b.cpu_wait_ns << " other io "
      << b.other_io_ns << " other " << b.other_ns << " of " << b.data_idle_ns;
  // The workers are blocked in pread from the request's submission on,
  // its time in the block layer's queues included: not "other syscalls".
  EXPECT_LT(b.other_io_ns, b.disk_ns / 2);
  EXPECT_GT(a->measured_total.os.block_io_workers.bytes, 0u);

  const Diagnosis diagnosis = Diagnose(*a);
  const Finding* data = nullptr;
  for (const Finding* f : {&diagnosis.primary}) {
    if (f->bottleneck == Bottleneck::kDataLoader) data = f;
  }
  for (const Finding& f : diagnosis.secondary) {
    if (f.bottleneck == Bottleneck::kDataLoader) data = &f;
  }
  ASSERT_NE(data, nullptr) << diagnosis.headline;
  EXPECT_NE(data->recommendation.find("Storage sets the pace"), std::string::npos) << data->recommendation;
  EXPECT_NE(data->evidence.find("waiting for disk"), std::string::npos) << data->evidence;
}

}  // namespace
}  // namespace gpuos
