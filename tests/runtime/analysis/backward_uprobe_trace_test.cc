// Backward passes from gpuos-trace's uprobe on the autograd engine
// (record/torch_backward_probes.h), end to end with real eBPF: every
// outermost backward pass of an un-annotated PyTorch job is one
// "autograd.backward" NVTX mark in the domain "gpuos.uprobe" on the thread
// that ran it, and the report's steps come from them ("backward_uprobe").
//   - gpuos-trainer (LibTorch, C++) with --no-nvtx, launched: as many
//     marks as its --steps (the loader maps libtorch before main());
//   - the same, attached to a running trainer: the steps are on its loop's
//     thread, one per iteration of its own timing (within 5%);
//   - a Python loop (Debian's python3-torch) with --no-python-hooks,
//     launched, and attached before its loop starts: as many marks as
//     its iterations;
//   - a job whose backward passes throw (caught by the script) and nest
//     (reentrant activation checkpointing) runs on unharmed, and only its
//     outermost backward passes are marked.
// Needs root (eBPF); the trainer and python3-torch parts skip without them.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
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
constexpr int kTrainerWarmup = 5;

struct Backward {
  size_t marks = 0;
  std::set<uint32_t> tids;
  uint32_t pid = 0;
};

Backward BackwardMarks(const std::string& trace) {
  Backward b;
  auto contents = rt::ReadTrace(trace);
  EXPECT_TRUE(contents.ok()) << contents.status();
  if (!contents.ok()) return b;
  for (const v1::Event& e : contents->events) {
    if (!e.has_nvtx_mark() || e.nvtx_mark().domain() != "gpuos.uprobe") continue;
    EXPECT_EQ(e.nvtx_mark().name(), "autograd.backward");
    ++b.marks;
    b.tids.insert(e.tid());
    b.pid = e.pid();
  }
  return b;
}

struct Steps {
  std::string source;
  std::string note;
  double steps = 0;
  double mean_ms = 0;
  // Over the measured steps past the trainer's --warmup, the iterations
  // its own timing covers (its first steps run slower).
  double mean_past_warmup_ms = 0;
  double tid = 0;
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
  s.mean_ms = a.at("duration_ns").struct_value().fields().at("mean").number_value() / 1e6;
  if (a.contains("tid")) s.tid = a.at("tid").number_value();
  double sum_ns = 0;
  int measured = 0;
  for (const auto& v : j->fields().at("steps").list_value().values()) {
    const auto& step = v.struct_value().fields();
    if (step.at("index").number_value() <= kTrainerWarmup || step.at("warmup").bool_value()) continue;
    sum_ns += step.at("duration_ns").number_value();
    ++measured;
  }
  if (measured > 0) s.mean_past_warmup_ms = sum_ns / measured / 1e6;
  return s;
}

double Value(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  double v = 0;
  if (at == std::string::npos) return v;
  const size_t end = out.find_first_of(" \n", at);
  EXPECT_TRUE(absl::SimpleAtod(out.substr(at + key.size() + 1, end - at - key.size() - 1), &v)) << out;
  return v;
}

std::vector<std::string> TrainerArgs(int steps) {
  return {kTrainer, "--steps", absl::StrCat(steps), "--warmup", absl::StrCat(kTrainerWarmup), "--model", "tiny",
          "--workers", "1", "--preprocess-us", "100", "--no-nvtx"};
}

class BackwardUprobeTest : public ::testing::Test {
 protected:
  void SetUp() override { GPUOS_REQUIRE_ROOT(); }
  rt::TempDir dir_;
};

TEST_F(BackwardUprobeTest, LibTorchTrainerLaunched) {
  if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", dir_.File("trainer.gpuos"), "--"};
  for (const std::string& a : TrainerArgs(60)) argv.push_back(a);
  rt::RunResult r = rt::Run(argv);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const Backward b = BackwardMarks(dir_.File("trainer.gpuos"));
  EXPECT_EQ(b.marks, 60u);  // one loss.backward() a step
  EXPECT_EQ(b.tids.size(), 1u);
  const Steps found = Report(dir_.File("trainer.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  EXPECT_EQ(found.steps, 59) << found.note;  // between consecutive starts
  const double own_ms = 1000 / Value(r.out, "steps_per_s");
  EXPECT_NEAR(found.mean_past_warmup_ms, own_ms, 0.05 * own_ms) << found.note;
}

TEST_F(BackwardUprobeTest, LibTorchTrainerAttached) {
  if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  rt::Child trainer = rt::Child::Start(TrainerArgs(300));
  usleep(300'000);  // past start-up, into the loop
  rt::RunResult attach = rt::Run({rt::TracerPath(), "-q", "--pid", absl::StrCat(trainer.pid()), "--duration",
                                  "4s", "-o", dir_.File("attached.gpuos")});
  ASSERT_EQ(attach.exit_code, 0) << attach.Describe();
  rt::RunResult job = trainer.Wait(60);
  ASSERT_EQ(job.exit_code, 0) << job.Describe();
  const Backward b = BackwardMarks(dir_.File("attached.gpuos"));
  ASSERT_GE(b.marks, 20u);
  ASSERT_EQ(b.tids.size(), 1u);
  const Steps found = Report(dir_.File("attached.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  // The loop's own thread, not a data worker's (they never run backward).
  EXPECT_EQ(found.tid, *b.tids.begin()) << found.note;
  EXPECT_EQ(static_cast<uint32_t>(found.tid), static_cast<uint32_t>(trainer.pid())) << found.note;
  const double own_ms = 1000 / Value(job.out, "steps_per_s");
  EXPECT_NEAR(found.mean_ms, own_ms, 0.05 * own_ms) << found.note;
}

// A hand-written update loop of `iters` iterations that starts when the
// file `go` exists (at once when it is empty) and prints "iterations=N".
std::string PythonLoop(int iters, const std::string& go) {
  return absl::StrCat(R"(
import os, sys, time, torch
torch.manual_seed(0)
torch.set_num_threads(1)
go = ")", go, R"("
while go and not os.path.exists(go):
    time.sleep(0.01)
w1 = torch.randn(128, 256, requires_grad=True)
w2 = torch.randn(256, 10, requires_grad=True)
x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
n = 0
for i in range()", iters, R"():
    loss = torch.nn.functional.cross_entropy(torch.relu(x @ w1) @ w2, y)
    loss.backward()
    with torch.no_grad():
        for p in (w1, w2):
            p -= 0.01 * p.grad
            p.grad = None
    n += 1
    with torch.no_grad():
        (x @ w1).sum()  # evaluation-like work: no backward pass
print("iterations=%d" % n)
)");
}

class PythonBackwardTest : public BackwardUprobeTest {
 protected:
  void SetUp() override {
    BackwardUprobeTest::SetUp();
    if (IsSkipped()) return;
    if (std::system((std::string(kPython) + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << kPython << " has no torch (apt-get install python3-torch)";
    }
  }
};

TEST_F(PythonBackwardTest, LaunchedWithoutPythonHooks) {
  std::ofstream(dir_.File("loop.py")) << PythonLoop(80, "");
  rt::RunOptions options;
  options.timeout_s = 120;
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--no-python-hooks", "-o", dir_.File("loop.gpuos"), "--",
                             kPython, dir_.File("loop.py")},
                            options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_EQ(Value(r.out, "iterations"), 80) << r.Describe();
  const Backward b = BackwardMarks(dir_.File("loop.gpuos"));
  EXPECT_EQ(b.marks, 80u);
  EXPECT_EQ(b.tids.size(), 1u);
  const Steps found = Report(dir_.File("loop.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  EXPECT_EQ(found.steps, 79) << found.note;
}

TEST_F(PythonBackwardTest, Attached) {
  const std::string go = dir_.File("go");
  std::ofstream(dir_.File("loop.py")) << PythonLoop(80, go);
  rt::Child job = rt::Child::Start({kPython, dir_.File("loop.py")});
  // torch is imported (libtorch_cpu mapped) before the script waits.
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        auto maps = rt::ReadFile(absl::StrCat("/proc/", job.pid(), "/maps"));
        return maps && maps->find("libtorch_cpu.so") != std::string::npos;
      },
      60));
  rt::Child tracer = rt::Child::Start(
      {rt::TracerPath(), "-q", "--pid", absl::StrCat(job.pid()), "-o", dir_.File("attached.gpuos")});
  // Attached once the trace file has its header; then a moment for the rest.
  ASSERT_TRUE(rt::WaitUntil(
      [&] {
        auto bytes = rt::ReadFile(dir_.File("attached.gpuos"));
        return bytes && !bytes->empty();
      },
      30));
  usleep(1'000'000);
  ASSERT_TRUE(rt::WriteFile(go, ""));
  rt::RunResult out = job.Wait(120);
  ASSERT_EQ(out.exit_code, 0) << out.Describe();
  ASSERT_EQ(Value(out.out, "iterations"), 80) << out.Describe();
  // The tracer ends with the job.
  rt::RunResult traced = tracer.Wait(60);
  ASSERT_EQ(traced.exit_code, 0) << traced.Describe();
  const Backward b = BackwardMarks(dir_.File("attached.gpuos"));
  EXPECT_EQ(b.marks, 80u);
  EXPECT_EQ(b.tids.size(), 1u);
  const Steps found = Report(dir_.File("attached.gpuos"));
  ASSERT_EQ(found.source, "backward_uprobe") << found.note;
  EXPECT_EQ(found.steps, 79) << found.note;
}

TEST_F(PythonBackwardTest, ThrowingAndNestedBackwardPasses) {
  // Every fifth iteration a backward pass throws out of the engine (a C++
  // exception through Engine::execute: a uretprobe there would make it
  // std::terminate() the job); every iteration's backward pass runs two
  // more inside it (reentrant checkpointing of two segments).
  std::ofstream(dir_.File("edge.py")) << R"(
import torch
from torch.utils.checkpoint import checkpoint
torch.set_num_threads(1)
class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x * 2
    @staticmethod
    def backward(ctx, g): raise RuntimeError("boom")
w = torch.randn(8, 8, requires_grad=True)
x = torch.randn(4, 8)
a, b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
outermost = caught = 0
for i in range(40):
    if i % 5 == 0:
        try:
            Boom.apply(x @ w).sum().backward()
        except RuntimeError:
            caught += 1
        outermost += 1
    y = checkpoint(b, checkpoint(a, x @ w, use_reentrant=True), use_reentrant=True)
    y.sum().backward()
    outermost += 1
print("outermost=%d caught=%d" % (outermost, caught))
)";
  rt::RunOptions options;
  options.timeout_s = 120;
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--no-python-hooks", "-o", dir_.File("edge.gpuos"), "--",
                             kPython, dir_.File("edge.py")},
                            options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_EQ(Value(r.out, "caught"), 8) << r.Describe();
  ASSERT_EQ(Value(r.out, "outermost"), 48) << r.Describe();
  const Backward b = BackwardMarks(dir_.File("edge.gpuos"));
  EXPECT_EQ(b.marks, 48u);
}

}  // namespace
}  // namespace gpuos
