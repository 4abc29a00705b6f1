// The LibTorch trainer (workloads/) traced on the CPU, as CI can run it:
// `gpuos-trace -- gpuos-trainer --device cpu --steps 12 --warmup 2
// --batch-size 32 --workers 2` works, its NVTX steps and phases are recorded
// on the training thread, its worker processes are followed from their
// first instruction, and the report finds the steps.  Needs root and a
// trainer built against Debian's LibTorch; skipped otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "analysis/step_analysis.h"
#include "gtest/gtest.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

const std::string kTracer = GPUOS_TRACE_BIN;
const std::string kTrainer = GPUOS_TRAINER_BIN;

TEST(TrainerTrace, StepsPhasesAndWorkerProcessesAreRecorded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to load eBPF programs";
  if (access(kTrainer.c_str(), X_OK) != 0) GTEST_SKIP() << "gpuos-trainer not built (no LibTorch)";
  char templ[] = "/tmp/gpuos-trainer-test.XXXXXX";
  std::string dir = mkdtemp(templ);
  std::string trace = dir + "/trainer.gpuos";
  std::string command = kTracer + " -q -o " + trace + " -- " + kTrainer +
                        " --device cpu --steps 12 --warmup 2 --batch-size 32 --workers 2 > " + dir +
                        "/out.txt 2>&1";
  int status = system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;

  auto reader = TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::map<std::string, int> ranges;
  std::set<uint32_t> step_tids;
  uint32_t root = 0;
  std::set<uint32_t> children;  // processes forked by the trainer
  std::map<uint32_t, std::string> process_comm;
  ASSERT_TRUE(ForEachEvent(**reader, [&](const v1::Event& e) {
                if (e.has_process_start()) {
                  if (e.process_start().is_root()) root = e.pid();
                  else if (e.process_start().ppid() == root) children.insert(e.pid());
                }
                if (e.has_comm_change()) process_comm[e.tid()] = e.comm_change().new_comm();
                if (!e.has_nvtx_range()) return;
                const std::string& name = e.nvtx_range().name();
                std::string key = name.rfind("step ", 0) == 0 ? "step" : name;
                ++ranges[key];
                if (key == "step") step_tids.insert(e.tid());
              }).ok());
  EXPECT_EQ(ranges["step"], 12);
  for (const char* phase : {"get batch", "forward", "backward", "optimizer step"}) {
    EXPECT_EQ(ranges[phase], 12) << phase;
  }
  EXPECT_EQ(step_tids.size(), 1u) << "steps come from one training thread";
  EXPECT_EQ(children.size(), 2u) << "both worker processes are followed";
  for (uint32_t worker : children) {
    EXPECT_EQ(process_comm[worker].rfind("gpuos-data", 0), 0u) << process_comm[worker];
  }

  StepOptions options;
  options.warmup_steps = 2;
  auto steps = AnalyzeSteps(trace, options);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(steps->steps.size(), 12u);
  EXPECT_EQ(steps->measured_steps, 10u);
  EXPECT_EQ(steps->worker_processes, 2u);
  system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpuos
