// The Python start-up hook, end to end: a PyTorch script with no NVTX and
// no change gets one "DataLoader fetch" range per batch fetch, one
// "DataLoader iter" range per iterator made of a DataLoader (an epoch's
// start: data loading, not extra work), one
// "optimizer.step" range per step and one "autograd.backward" range per
// loss.backward(), on its main thread, in the domain "gpuos.python"
// (a backward nested in a backward pass, as reentrant checkpointing makes,
// is not marked again); --no-python-hooks turns them off.  Needs root and a
// python3 with torch (Debian's python3-torch); skipped otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "analysis/step_analysis.h"
#include "gtest/gtest.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

const std::string kTracer = GPUOS_TRACE_BIN;
const char* kPython = "/usr/bin/python3";

int Shell(const std::string& command) {
  int status = system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Counts {
  int fetches = 0;
  int iters = 0;
  int steps = 0;
  int backwards = 0;
  uint32_t backward_tid = 0;
  uint32_t fetch_tid = 0;
  uint32_t pid = 0;
};

Counts CountRanges(const std::string& trace) {
  Counts counts;
  auto reader = TraceReader::Open(trace);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return counts;
  EXPECT_TRUE(ForEachEvent(**reader, [&](const v1::Event& e) {
                if (!e.has_nvtx_range() || e.nvtx_range().domain() != "gpuos.python") return;
                if (e.nvtx_range().name() == "DataLoader fetch") {
                  ++counts.fetches;
                  counts.fetch_tid = e.tid();
                  counts.pid = e.pid();
                }
                if (e.nvtx_range().name() == "DataLoader iter") ++counts.iters;
                if (e.nvtx_range().name() == "optimizer.step") ++counts.steps;
                if (e.nvtx_range().name() == "autograd.backward") {
                  ++counts.backwards;
                  counts.backward_tid = e.tid();
                }
              }).ok());
  return counts;
}

class PythonHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to load eBPF programs";
    if (Shell(std::string(kPython) + " -c 'import torch' 2>/dev/null") != 0) {
      GTEST_SKIP() << kPython << " has no torch (apt-get install python3-torch)";
    }
    char templ[] = "/tmp/gpuos-pyhooks.XXXXXX";
    dir_ = mkdtemp(templ);
    script_ = dir_ + "/train.py";
    std::ofstream(script_) << R"(
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
data = TensorDataset(torch.randn(200, 10), torch.randn(200, 1))
loader = DataLoader(data, batch_size=20, num_workers=2)
model = torch.nn.Linear(10, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
steps = 0
for x, y in loader:
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
    steps += 1
assert steps == 10
)";
  }
  void TearDown() override {
    if (!dir_.empty()) Shell("rm -rf " + dir_);
  }
  std::string dir_, script_;
};

TEST_F(PythonHooksTest, MarksEveryFetchAndOptimizerStepWithoutCodeChanges) {
  std::string trace = dir_ + "/hooks.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + script_), 0);
  Counts counts = CountRanges(trace);
  // 10 batches, plus the fetch that ends the loop with StopIteration; one
  // iterator made (the loop's).
  EXPECT_EQ(counts.fetches, 11);
  EXPECT_EQ(counts.iters, 1);
  EXPECT_EQ(counts.steps, 10);
  EXPECT_EQ(counts.backwards, 10);
  EXPECT_EQ(counts.fetch_tid, counts.pid) << "fetches happen on the main thread";
  EXPECT_EQ(counts.backward_tid, counts.pid);
}

// A DataLoader without persistent workers forks them again at every
// epoch's iter(): the loop waits there for data, once an epoch.  That is the
// iteration's data loading, marked by the hook, not extra work (an
// evaluation pass) to leave out of the summaries.
TEST_F(PythonHooksTest, AnEpochsNewDataLoaderIteratorIsDataLoadingNotExtraWork) {
  std::ofstream(dir_ + "/epochs.py") << R"(
import torch, time
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
data = TensorDataset(torch.randn(400, 64), torch.randn(400, 1))
loader = DataLoader(data, batch_size=20, num_workers=2)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(4):
    for x, y in loader:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        time.sleep(0.005)
)";
  const std::string trace = dir_ + "/epochs.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + dir_ + "/epochs.py"), 0);
  EXPECT_EQ(CountRanges(trace).iters, 4);
  auto steps = AnalyzeSteps(trace, StepOptions());
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->source, StepSource::kOptimizerSteps);
  // 80 optimizer steps: 79 steps between them; the first of epochs 2-4
  // begin with the new iterator.
  ASSERT_EQ(steps->steps.size(), 79u);
  for (size_t i : {19, 39, 59}) {
    const StepRecord& s = steps->steps[i];
    EXPECT_TRUE(s.left_out.empty()) << "step " << i << ": " << s.left_out;
    EXPECT_FALSE(s.warmup) << "step " << i;
    // Most of it waits for the new workers' data; time the loop's thread
    // spent preempted on a loaded machine is the OS's, and not counted.
    const uint64_t os = s.stages[static_cast<size_t>(Stage::kOsOverhead)];
    EXPECT_GT(s.stages[static_cast<size_t>(Stage::kDataLoading)], (s.duration_ns() - std::min(os, s.duration_ns())) / 2)
        << "step " << i;
  }
  EXPECT_GE(steps->measured_steps, 75u) << "no more than a few steps left out";
}

// Python's multiprocessing ends a forked child with os._exit(), which runs
// no atexit handler, and scripts call it to skip a slow teardown: the
// shim's last events (here all of them: the steps take less than its flush
// interval) are sent before _exit all the same (cupti_shim/process_exit.cc).
TEST_F(PythonHooksTest, AProcessEndedByOsExitKeepsItsLastSteps) {
  std::ofstream(dir_ + "/os_exit.py") << R"(
import multiprocessing as mp, os, torch
def train(n):
    model = torch.nn.Linear(10, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(n):
        opt.zero_grad()
        model(torch.randn(8, 10)).sum().backward()
        opt.step()
if __name__ == "__main__":
    child = mp.get_context("fork").Process(target=train, args=(25,))
    child.start()
    child.join()
    assert child.exitcode == 0
    train(5)
    os._exit(0)
)";
  const std::string trace = dir_ + "/os_exit.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + dir_ + "/os_exit.py"), 0);
  std::map<uint32_t, int> steps_by_pid;
  uint32_t root = 0;
  auto reader = TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(ForEachEvent(**reader, [&](const v1::Event& e) {
                if (e.has_process_start() && e.process_start().is_root()) root = e.pid();
                if (e.has_nvtx_range() && e.nvtx_range().name() == "optimizer.step") ++steps_by_pid[e.pid()];
              }).ok());
  ASSERT_NE(root, 0u);
  ASSERT_EQ(steps_by_pid.size(), 2u);
  for (const auto& [pid, steps] : steps_by_pid) EXPECT_EQ(steps, pid == root ? 5 : 25) << "pid " << pid;
}

TEST_F(PythonHooksTest, MarksEachLossBackwardOnceEvenWithReentrantCheckpointing) {
  std::ofstream(dir_ + "/ckpt.py") << R"(
import torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
layers = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
x = torch.randn(4, 8, requires_grad=True)
for _ in range(5):
    checkpoint(layers, x).sum().backward()          # reentrant: a backward inside the backward
    torch.autograd.backward(layers(x).sum())        # the function itself
    g, = torch.autograd.grad(layers(x).sum(), x)    # not a backward() call
print("ok")
)";
  std::string trace = dir_ + "/ckpt.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + dir_ + "/ckpt.py"), 0);
  Counts counts = CountRanges(trace);
  EXPECT_EQ(counts.backwards, 10);
}

// A call that lets go of the GIL (a ctypes.CDLL function does) waits to
// take it back for any other Python thread that holds it (a DataLoader's
// pin-memory thread), at every mark: 2,000 such calls beside a spinning
// thread took 0.14-0.22 s on the VM (ctypes.CDLL); calls that keep it,
// 1 ms and a few switch intervals (5 ms each) at most.  Where the C extension was built beside the
// hook, the hook must be using it (a broken build would fall back to ctypes
// unseen).
TEST_F(PythonHooksTest, TheMarksKeepTheGilThroughTheirCallsIntoTheShim) {
  std::ofstream(dir_ + "/gil.py") << R"(
import os, sys, threading, time, sitecustomize
push, pop = sitecustomize._shim_ranges()
here = os.path.dirname(sitecustomize.__file__)
if os.path.exists(os.path.join(here, "_gpuos_marks.abi3.so")):
    assert push.__module__ == "_gpuos_marks", "the C extension is built but not used"
stop = []
spinner = threading.Thread(target=lambda: [None for _ in iter(lambda: bool(stop), True)])
spinner.start()
time.sleep(0.05)
start = time.monotonic()
for _ in range(1000):
    push(b"gil")
    pop()
elapsed = time.monotonic() - start
stop.append(1)
spinner.join()
assert elapsed < 0.06, "1,000 marks beside a spinning thread took %.3f s" % elapsed
print("ok", push.__module__, "%.4f" % elapsed)
)";
  std::string trace = dir_ + "/gil.gpuos";
  EXPECT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + dir_ + "/gil.py"), 0);
}

// Capture windows counted from the hook's marks (no NVTX step ranges): step
// i runs from the (i-1)th optimizer.step's return to the i-th's (or, in a
// loop with no optimizer, loss.backward()'s, from step 2), as the report
// numbers them, so that --capture steps=3..4 gives the report's steps 3 and
// 4 their CUDA detail; each edge is at that mark's end.
struct MarkEdges {
  std::vector<uint64_t> ends;  // ends of the counting marks, in order
  std::vector<std::pair<int64_t, uint64_t>> open, close;  // (step, ts)
};

MarkEdges CaptureFromMarks(const std::string& trace, const std::string& mark) {
  MarkEdges out;
  auto reader = TraceReader::Open(trace);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  EXPECT_TRUE(ForEachEvent(**reader, [&](const v1::Event& e) {
                if (e.has_nvtx_range() && e.nvtx_range().domain() == "gpuos.python" &&
                    e.nvtx_range().name() == mark) {
                  out.ends.push_back(e.ts_ns() + e.nvtx_range().duration_ns());
                }
                if (e.has_capture_window()) {
                  auto& edges = e.capture_window().edge() == v1::CaptureWindow::OPEN ? out.open : out.close;
                  edges.emplace_back(e.capture_window().step(), e.ts_ns());
                }
              }).ok());
  std::sort(out.ends.begin(), out.ends.end());
  return out;
}

TEST_F(PythonHooksTest, CaptureWindowsCountStepsFromTheOptimizerStepsOrTheBackwardPasses) {
  std::ofstream(dir_ + "/no_optimizer.py") << R"(
import torch
torch.manual_seed(0)
w = torch.randn(10, 1, requires_grad=True)
for _ in range(10):
    x, y = torch.randn(20, 10), torch.randn(20, 1)
    ((x @ w - y) ** 2).mean().backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad.zero_()
)";
  for (const auto& [script, mark] : {std::pair<std::string, std::string>{script_, "optimizer.step"},
                                     {dir_ + "/no_optimizer.py", "autograd.backward"}}) {
    SCOPED_TRACE(mark);
    const std::string trace = dir_ + "/capture.gpuos";
    ASSERT_EQ(Shell(kTracer + " -q --capture steps=3..4 -o " + trace + " -- " + kPython + " " + script), 0);
    const MarkEdges edges = CaptureFromMarks(trace, mark);
    ASSERT_EQ(edges.ends.size(), 10u);
    ASSERT_EQ(edges.open.size(), 1u);
    ASSERT_EQ(edges.close.size(), 1u);
    // Step 3 begins at the 3rd mark's end; step 4 ends at the 5th's.
    EXPECT_EQ(edges.open[0], std::make_pair(int64_t{3}, edges.ends[2]));
    EXPECT_EQ(edges.close[0], std::make_pair(int64_t{4}, edges.ends[4]));
    auto analysis = AnalyzeSteps(trace, StepOptions());
    ASSERT_TRUE(analysis.ok()) << analysis.status();
    ASSERT_EQ(analysis->capture.windows.size(), 1u);
    EXPECT_EQ(analysis->capture.windows[0].first_step, 3);
    EXPECT_EQ(analysis->capture.windows[0].last_step, 4);
    for (const StepRecord& s : analysis->steps) EXPECT_EQ(s.cuda_detail, s.index == 3 || s.index == 4) << s.index;
  }
  // Step 1 of a loop with an optimizer: one window, from the first
  // optimizer.step's return to the second's (the backward pass before the
  // first update opens nothing).
  const std::string trace = dir_ + "/first.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q --capture steps=1..1 -o " + trace + " -- " + kPython + " " + script_), 0);
  const MarkEdges edges = CaptureFromMarks(trace, "optimizer.step");
  ASSERT_EQ(edges.ends.size(), 10u);
  ASSERT_EQ(edges.open.size(), 1u);
  ASSERT_EQ(edges.close.size(), 1u);
  EXPECT_EQ(edges.open[0], std::make_pair(int64_t{1}, edges.ends[0]));
  EXPECT_EQ(edges.close[0], std::make_pair(int64_t{1}, edges.ends[1]));
}

// A GAN steps two optimizers an iteration, and a wrapper optimizer (as
// Accelerate's AcceleratedOptimizer) steps the one it wraps: the hook names
// the second optimizer's ranges "optimizer.step#2" and marks only the outer
// of nested steps; the report and the shim's capture windows both count one
// step an iteration, closed by the optimizer that steps last in it.
TEST_F(PythonHooksTest, SeveralOptimizersMakeOneStepAnIterationAndAWrapperOneRange) {
  std::ofstream(dir_ + "/gan.py") << R"(
import torch
torch.manual_seed(0)
D, G = torch.nn.Linear(8, 1), torch.nn.Linear(4, 8)

class Wrapped(torch.optim.Optimizer):
    def __init__(self, inner):
        self.inner = inner
    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad()
    def step(self, closure=None):
        return self.inner.step(closure)

optD = torch.optim.Adam(D.parameters(), lr=0.001)
optG = Wrapped(torch.optim.SGD(G.parameters(), lr=0.01))
for _ in range(10):
    real, z = torch.randn(16, 8), torch.randn(16, 4)
    optD.zero_grad()
    (D(G(z).detach()).mean() - D(real).mean()).backward()
    optD.step()
    optG.zero_grad()
    (-D(G(z)).mean()).backward()
    optG.step()
)";
  const std::string trace = dir_ + "/gan.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q --capture steps=3..4 -o " + trace + " -- " + kPython + " " + dir_ + "/gan.py"),
            0);
  const MarkEdges first = CaptureFromMarks(trace, "optimizer.step");
  const MarkEdges second = CaptureFromMarks(trace, "optimizer.step#2");
  EXPECT_EQ(first.ends.size(), 10u);
  ASSERT_EQ(second.ends.size(), 10u) << "one range per wrapper step, none for the optimizer it wraps";
  EXPECT_EQ(CaptureFromMarks(trace, "optimizer.step#3").ends.size(), 0u);

  auto analysis = AnalyzeSteps(trace, StepOptions());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->source, StepSource::kOptimizerSteps);
  ASSERT_EQ(analysis->steps.size(), 9u) << "one step an iteration, not one an optimizer step";
  for (size_t i = 0; i < analysis->steps.size(); ++i) {
    EXPECT_EQ(analysis->steps[i].end_ns, second.ends[i + 1]) << "step " << analysis->steps[i].index;
  }
  EXPECT_NE(analysis->note.find("2 optimizers"), std::string::npos) << analysis->note;

  // The shim's windows are the report's steps 3 and 4.
  ASSERT_EQ(second.open.size(), 1u);
  ASSERT_EQ(second.close.size(), 1u);
  EXPECT_EQ(second.open[0], std::make_pair(int64_t{3}, second.ends[2]));
  EXPECT_EQ(second.close[0], std::make_pair(int64_t{4}, second.ends[4]));
  ASSERT_EQ(analysis->capture.windows.size(), 1u);
  for (const StepRecord& s : analysis->steps) EXPECT_EQ(s.cuda_detail, s.index == 3 || s.index == 4) << s.index;
}

TEST_F(PythonHooksTest, AGradScalersStepIsItsOptimizersRangeEvenWhereItSkipsTheOptimizer) {
  // Mixed precision: scaler.step(optimizer) skips optimizer.step() where the
  // gradients overflowed.  The iteration ran all the same.  (CPU torch 1.13
  // cannot overflow a scaler: iterations 2 and 3 take the optimizer's step
  // away, as a skip does; the disabled scaler calls it otherwise.)
  std::ofstream(dir_ + "/amp.py") << R"(
import torch
try:
    from torch.amp import GradScaler
except ImportError:
    from torch.cuda.amp import GradScaler
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
scaler = GradScaler(enabled=False)
for i in range(10):
    opt.zero_grad()
    scaler.scale(m(torch.randn(8, 4)).sum()).backward()
    if i in (2, 3):
        opt.step = lambda *args, **kwargs: None
    else:
        opt.__dict__.pop("step", None)
    scaler.step(opt)
    scaler.update()
)";
  const std::string trace = dir_ + "/amp.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q -o " + trace + " -- " + kPython + " " + dir_ + "/amp.py"), 0);
  EXPECT_EQ(CaptureFromMarks(trace, "optimizer.step").ends.size(), 10u)
      << "one range a scaler step, none more for the optimizer's own";
  EXPECT_EQ(CaptureFromMarks(trace, "optimizer.step#2").ends.size(), 0u);
  auto analysis = AnalyzeSteps(trace, StepOptions());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->source, StepSource::kOptimizerSteps);
  EXPECT_EQ(analysis->steps.size(), 9u);
}

TEST_F(PythonHooksTest, NoPythonHooksTurnsThemOff) {
  std::string trace = dir_ + "/nohooks.gpuos";
  ASSERT_EQ(Shell(kTracer + " -q --no-python-hooks -o " + trace + " -- " + kPython + " " + script_), 0);
  Counts counts = CountRanges(trace);
  EXPECT_EQ(counts.fetches, 0);
  EXPECT_EQ(counts.steps, 0);
  EXPECT_EQ(counts.backwards, 0);
}

TEST_F(PythonHooksTest, AnExistingSitecustomizeStillRuns) {
  std::string site = dir_ + "/site";
  Shell("mkdir -p " + site);
  std::ofstream(site + "/sitecustomize.py") << "open('" + dir_ + "/chained', 'w').write('yes')\n";
  std::string trace = dir_ + "/chained.gpuos";
  ASSERT_EQ(Shell("PYTHONPATH=" + site + " " + kTracer + " -q -o " + trace + " -- " + kPython + " " +
                script_),
            0);
  EXPECT_EQ(access((dir_ + "/chained").c_str(), F_OK), 0);
  EXPECT_EQ(CountRanges(trace).steps, 10);
}

}  // namespace
}  // namespace gpuos
