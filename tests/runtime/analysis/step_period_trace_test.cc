// Steps of unannotated jobs, end to end on the CPU: the real gpuos-trace
// records real programs and its report must find the training iterations
// from the work itself, agreeing with the job's own timing.
//   - gpuos-trainer (LibTorch) with --no-nvtx, launched: as many steps as
//     the NVTX-annotated run (within 1), mean within 5% of its steps_per_s;
//   - the same, attached with --pid for a second: mean within 5%;
//   - a Python loop with a hand-written update and no optimizer (Debian's
//     python3-torch), launched: steps from the hook's loss.backward() marks;
//   - a data-starved Python loop (DataLoader, hand-written update) with
//     --no-python-hooks: steps from the backward uprobes, not confused by
//     its waits for data.
// The un-annotated runs' steps come from gpuos-trace's backward uprobes
// (backward_uprobe_trace_test.cc tests them on their own).
// Needs root (eBPF); the trainer and python3-torch parts skip without them.
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

const std::string kTrainer = GPUOS_TRAINER_BIN;
const char* kPython = "/usr/bin/python3";

struct Steps {
  std::string source;
  std::string note;
  double steps = 0;
  double measured = 0;
  double mean_ms = 0;
};

Steps Report(const std::string& trace) {
  Steps s;
  absl::StatusOr<google::protobuf::Struct> j = rt::JsonReport(trace);
  EXPECT_TRUE(j.ok()) << j.status();
  if (!j.ok()) return s;
  const auto& a = j->fields().at("step_analysis").struct_value().fields();
  s.source = a.at("source").string_value();
  s.note = a.at("note").string_value();
  s.steps = a.at("steps").number_value();
  s.measured = a.at("measured_steps").number_value();
  s.mean_ms = a.at("duration_ns").struct_value().fields().at("mean").number_value() / 1e6;
  return s;
}

// "key=value" from a summary line.
double Value(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  double v = 0;
  if (at == std::string::npos) return v;
  const size_t end = out.find_first_of(" \n", at);
  EXPECT_TRUE(absl::SimpleAtod(out.substr(at + key.size() + 1, end - at - key.size() - 1), &v)) << out;
  return v;
}

// The trainer, data-starved (one worker preprocessing 100 us a sample), so
// that the loop waits for every batch as an input-bound job does.
std::vector<std::string> TrainerArgs(int steps, bool nvtx) {
  std::vector<std::string> argv = {kTrainer, "--steps", absl::StrCat(steps), "--warmup", "5", "--model", "tiny",
                                   "--workers", "1", "--preprocess-us", "100"};
  if (!nvtx) argv.push_back("--no-nvtx");
  return argv;
}

class StepPeriodTraceTest : public ::testing::Test {
 protected:
  void SetUp() override { GPUOS_REQUIRE_ROOT(); }
  rt::TempDir dir_;
};

TEST_F(StepPeriodTraceTest, TrainerWithoutNvtxLaunchedMatchesTheAnnotatedRun) {
  if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  std::vector<std::string> annotated = {rt::TracerPath(), "-q", "-o", dir_.File("nvtx.gpuos"), "--"};
  for (const std::string& a : TrainerArgs(60, true)) annotated.push_back(a);
  rt::RunResult with = rt::Run(annotated);
  ASSERT_EQ(with.exit_code, 0) << with.Describe();
  std::vector<std::string> plain = {rt::TracerPath(), "-q", "-o", dir_.File("plain.gpuos"), "--"};
  for (const std::string& a : TrainerArgs(60, false)) plain.push_back(a);
  rt::RunResult without = rt::Run(plain);
  ASSERT_EQ(without.exit_code, 0) << without.Describe();

  const Steps nvtx = Report(dir_.File("nvtx.gpuos"));
  const Steps found = Report(dir_.File("plain.gpuos"));
  ASSERT_EQ(nvtx.source, "nvtx_step_ranges") << nvtx.note;
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  EXPECT_LE(std::abs(found.steps - nvtx.steps), 1) << found.note;
  const double own_ms = 1000 / Value(without.out, "steps_per_s");
  EXPECT_NEAR(found.mean_ms, own_ms, 0.05 * own_ms) << found.note;
}

TEST_F(StepPeriodTraceTest, TrainerWithoutNvtxAttached) {
  if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  // The attach window covers most of the loop, as the trainer's own
  // timing covers all of it (the machine's load may change meanwhile).
  rt::Child trainer = rt::Child::Start(TrainerArgs(300, false));
  usleep(300'000);  // past start-up, into the loop
  rt::RunResult attach = rt::Run({rt::TracerPath(), "-q", "--pid", absl::StrCat(trainer.pid()), "--duration", "10s",
                                  "-o", dir_.File("attached.gpuos")});
  ASSERT_EQ(attach.exit_code, 0) << attach.Describe();
  rt::RunResult job = trainer.Wait(60);
  ASSERT_EQ(job.exit_code, 0) << job.Describe();
  const Steps found = Report(dir_.File("attached.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  const double own_ms = 1000 / Value(job.out, "steps_per_s");
  EXPECT_GE(found.steps, 100) << found.note;
  EXPECT_NEAR(found.mean_ms, own_ms, 0.05 * own_ms) << found.note;
}

class PythonLoopTest : public StepPeriodTraceTest {
 protected:
  void SetUp() override {
    StepPeriodTraceTest::SetUp();
    if (IsSkipped()) return;
    if (std::system((std::string(kPython) + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << kPython << " has no torch (apt-get install python3-torch)";
    }
  }
  // Runs `script` under gpuos-trace; its last line is "... mean_step_s=X".
  double Trace(const std::string& script, const std::vector<std::string>& flags, const std::string& trace) {
    std::ofstream(dir_.File("loop.py")) << script;
    std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", trace};
    for (const std::string& f : flags) argv.push_back(f);
    argv.insert(argv.end(), {"--", kPython, dir_.File("loop.py")});
    rt::RunOptions options;
    options.timeout_s = 120;
    rt::RunResult r = rt::Run(argv, options);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return Value(r.out, "mean_step_s") * 1000;
  }
};

TEST_F(PythonLoopTest, HandWrittenUpdateLaunchedHasBackwardSteps) {
  const double own_ms = Trace(R"(
import time, torch
torch.manual_seed(0)
torch.set_num_threads(1)
w1 = torch.randn(256, 512, requires_grad=True)
w2 = torch.randn(512, 10, requires_grad=True)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
times = []
for i in range(60):
    t = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(torch.relu(x @ w1) @ w2, y)
    loss.backward()
    with torch.no_grad():
        for p in (w1, w2):
            p -= 0.01 * p.grad
            p.grad = None
    times.append(time.perf_counter() - t)
print("loop: mean_step_s=%.6f" % (sum(times[5:]) / len(times[5:])))
)",
                              {}, dir_.File("manual.gpuos"));
  const Steps found = Report(dir_.File("manual.gpuos"));
  ASSERT_EQ(found.source, "backward_ranges") << found.note;
  EXPECT_EQ(found.steps, 59) << found.note;
  EXPECT_NEAR(found.mean_ms, own_ms, 0.05 * own_ms) << found.note;
}

TEST_F(PythonLoopTest, DataStarvedLoopWithoutHooksHasBackwardUprobeSteps) {
  const double own_ms = Trace(R"(
import time, torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
class Slow(Dataset):
    def __len__(self): return 10**6
    def __getitem__(self, i):
        time.sleep(0.0002)
        return torch.randn(32), torch.randint(0, 4, ()).item()
loader = DataLoader(Slow(), batch_size=32, num_workers=1)
w = torch.randn(32, 4, requires_grad=True)
times, t = [], time.perf_counter()
for i, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(x @ w, y)
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad = None
    now = time.perf_counter()
    times.append(now - t)
    t = now
    if i + 1 == 80: break
print("loop: mean_step_s=%.6f" % (sum(times[5:]) / len(times[5:])))
)",
                              {"--no-python-hooks"}, dir_.File("starved.gpuos"));
  const Steps found = Report(dir_.File("starved.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  EXPECT_LE(std::abs(found.steps - 79), 1) << found.note;
  EXPECT_NEAR(found.mean_ms, own_ms, 0.05 * own_ms) << found.note;
}

}  // namespace
}  // namespace gpuos
