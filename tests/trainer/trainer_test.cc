// Runs the real gpuos-trainer binary on the CPU: option errors, the summary
// line, that every loader sees the same data, that training trains, MNIST
// files good and bad, NVTX range names and nesting (through a small NVTX
// injection library), and that data workers never outlive the trainer
// (SIGINT to the trainer or its process group, SIGKILL, a worker killed).
// The test process is a child subreaper, so an orphaned worker would be
// re-parented to it and show up in waitpid(-1).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    std::string pattern = ::testing::TempDir() + "gpuos_trainer_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override {
    // No test may leave a process behind, whatever it did.
    int status = 0;
    errno = 0;
    EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1) << "a child (orphaned worker?) is still around";
    EXPECT_EQ(errno, ECHILD);
    // After a failure, kill what is left so that it cannot outlive the test.
    for (pid_t child : ChildPids()) kill(child, SIGKILL);
    while (waitpid(-1, &status, 0) > 0) {
    }
  }

  // Children of this process, from /proc (re-parented orphans included).
  static std::vector<pid_t> ChildPids() {
    std::vector<pid_t> children;
    std::ifstream list("/proc/self/task/" + std::to_string(getpid()) + "/children");
    pid_t pid;
    while (list >> pid) children.push_back(pid);
    return children;
  }

  struct Run {
    pid_t pid = -1;
    std::string out_path;
    std::string err_path;
  };

  Run Start(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
            bool own_process_group = false) {
    Run run;
    const int n = runs_++;
    run.out_path = dir_ + "/out" + std::to_string(n);
    run.err_path = dir_ + "/err" + std::to_string(n);
    run.pid = fork();
    if (run.pid == 0) {
      if (own_process_group) setpgid(0, 0);
      const int out = open(run.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = open(run.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(GPUOS_TRAINER_BIN));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(GPUOS_TRAINER_BIN, argv.data());
      _exit(127);
    }
    return run;
  }

  // The wait status, or nullopt (after killing it) when it ran too long.
  std::optional<int> Wait(pid_t pid, milliseconds timeout = milliseconds(120'000)) {
    const auto deadline = steady_clock::now() + timeout;
    while (steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) return status;
      std::this_thread::sleep_for(milliseconds(10));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    return std::nullopt;
  }

  struct Result {
    int exit_code = -1;
    std::string out;
    std::string err;
  };

  Result RunToEnd(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    Run run = Start(args, env);
    Result result;
    std::optional<int> status = Wait(run.pid);
    EXPECT_TRUE(status.has_value()) << "gpuos-trainer timed out";
    if (status && WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
    result.out = ReadFile(run.out_path);
    result.err = ReadFile(run.err_path);
    return result;
  }

  // Waits for the "data worker pids a,b,c" line on the run's stderr.
  std::vector<pid_t> WorkerPids(const Run& run) {
    const std::string marker = "data worker pids ";
    const auto deadline = steady_clock::now() + milliseconds(60'000);
    while (steady_clock::now() < deadline) {
      const std::string err = ReadFile(run.err_path);
      const size_t at = err.find(marker);
      const size_t end = at == std::string::npos ? at : err.find('\n', at);
      if (end != std::string::npos) {
        std::vector<pid_t> pids;
        std::stringstream list(err.substr(at + marker.size(), end - at - marker.size()));
        std::string pid;
        while (std::getline(list, pid, ',')) pids.push_back(std::stoi(pid));
        return pids;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    ADD_FAILURE() << "no worker pid line on stderr";
    return {};
  }

  std::string dir_;
  int runs_ = 0;
};

std::map<std::string, std::string> ParseSummary(const std::string& out) {
  std::map<std::string, std::string> fields;
  std::stringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("gpuos-trainer: model=", 0) != 0) continue;
    std::stringstream words(line.substr(std::string("gpuos-trainer: ").size()));
    std::string word;
    while (words >> word) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
  }
  return fields;
}

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

TEST_F(TrainerTest, CpuRunWithWorkersPrintsOneSummaryLine) {
  Result r = RunToEnd({"--device", "cpu", "--steps", "12", "--warmup", "2", "--batch-size", "32",
                       "--workers", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto fields = ParseSummary(r.out);
  EXPECT_EQ(fields["model"], "tiny");
  EXPECT_EQ(fields["device"], "cpu");
  EXPECT_EQ(fields["workers"], "2");
  EXPECT_EQ(fields["batch"], "32");
  EXPECT_EQ(fields["steps"], "12");
  EXPECT_EQ(fields["warmup"], "2");
  EXPECT_EQ(fields["measured_steps"], "10");
  ASSERT_TRUE(fields.count("samples_per_s") && fields.count("steps_per_s"));
  const double samples_per_s = std::stod(fields["samples_per_s"]);
  const double steps_per_s = std::stod(fields["steps_per_s"]);
  EXPECT_GT(steps_per_s, 0);
  EXPECT_NEAR(samples_per_s, steps_per_s * 32, samples_per_s * 0.01 + 0.1);
  // elapsed_s is printed to the microsecond: ten CPU steps can take under
  // 5 ms, where 4 decimals alone would round off more than 1%.
  EXPECT_NEAR(std::stod(fields["elapsed_s"]) * steps_per_s, 10.0, 0.1);
}

TEST_F(TrainerTest, EveryLoaderDeliversTheSameBatches) {
  // Same seed, same data, same weights: only the loader differs, so the
  // final loss must be bit-for-bit the same.
  std::vector<std::string> common = {"--model", "mlp", "--hidden", "64", "--steps", "9",
                                     "--warmup", "1", "--batch-size", "16", "--threads", "1",
                                     "--seed", "7"};
  std::map<std::string, std::string> losses;
  for (const char* workers : {"0", "1", "3"}) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--workers", workers, "--prefetch-factor", "1"});
    Result r = RunToEnd(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    losses[workers] = ParseSummary(r.out)["loss"];
  }
  EXPECT_FALSE(losses["0"].empty());
  EXPECT_EQ(losses["0"], losses["1"]);
  EXPECT_EQ(losses["0"], losses["3"]);

  std::vector<std::string> other_seed = common;
  other_seed.back() = "8";
  Result r = RunToEnd(other_seed);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ParseSummary(r.out)["loss"], losses["0"]) << "the seed does not reach the data";
}

TEST_F(TrainerTest, TrainingLowersTheLoss) {
  auto loss_after = [&](const char* steps) {
    Result r = RunToEnd({"--model", "mlp", "--hidden", "32", "--layers", "1", "--steps", steps,
                         "--warmup", "1", "--batch-size", "32", "--workers", "1", "--lr", "0.05"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stod(ParseSummary(r.out)["loss"]);
  };
  const double early = loss_after("2");
  const double late = loss_after("60");
  EXPECT_LT(late, early * 0.5) << "early " << early << ", late " << late;
}

TEST_F(TrainerTest, CnnAndLargerImagesRun) {
  Result r = RunToEnd({"--model", "cnn", "--image-size", "3x64x64", "--steps", "3", "--warmup",
                       "1", "--batch-size", "4", "--workers", "2", "--preprocess-us", "200",
                       "--amp", "bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto fields = ParseSummary(r.out);
  EXPECT_EQ(fields["model"], "cnn");
  EXPECT_EQ(fields["image"], "3x64x64");
  EXPECT_EQ(fields["amp"], "bf16");
  EXPECT_GT(std::stoll(fields["params"]), 100'000);
}

TEST_F(TrainerTest, MlpSizeFollowsHiddenAndLayers) {
  Result r = RunToEnd({"--model", "mlp", "--hidden", "100", "--layers", "3", "--steps", "2",
                       "--warmup", "1", "--batch-size", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 784*100+100 + 2*(100*100+100) + 100*10+10
  EXPECT_EQ(ParseSummary(r.out)["params"], std::to_string(784 * 100 + 100 + 2 * 10100 + 1010));
}

TEST_F(TrainerTest, BadOptionsGiveOneLineErrorAndExit2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--device", "gpu"}, "--device"},
      {{"--model", "resnet"}, "--model"},
      {{"--steps", "0"}, "--steps"},
      {{"--batch-size", "ten"}, "--batch-size"},
      {{"--workers"}, "--workers needs a value"},
      {{"--steps", "5", "--warmup", "5"}, "--warmup"},
      {{"--image-size", "3x224"}, "--image-size"},
      {{"--model", "tiny", "--layers", "2"}, "--layers"},
      {{"--frobnicate"}, "unknown option --frobnicate"},
      {{"--pin-memory"}, "--pin-memory needs --device cuda"},
      {{"--non-blocking"}, "--non-blocking needs --device cuda"},
      {{"--copy-stream"}, "--copy-stream needs --device cuda"},
      {{"--cuda-graph"}, "--cuda-graph needs --device cuda"},
      {{"--device", "cuda", "--cuda-graph", "--warmup", "2"}, "--cuda-graph needs --warmup"},
      {{"--mnist", "/nonexistent"}, "/nonexistent/train-images-idx3-ubyte"},
  };
  for (const auto& [args, expected] : cases) {
    Result r = RunToEnd(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    const std::string first_line = r.err.substr(0, r.err.find('\n'));
    EXPECT_EQ(first_line.rfind("gpuos-trainer: ", 0), 0u) << first_line;
    EXPECT_NE(first_line.find(expected), std::string::npos) << first_line;
    EXPECT_EQ(r.out, "");
  }
  Result help = RunToEnd({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: gpuos-trainer"), std::string::npos);
}

void WriteBigEndian32(std::ofstream& out, uint32_t value) {
  const char bytes[4] = {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
                         static_cast<char>(value >> 8), static_cast<char>(value)};
  out.write(bytes, 4);
}

// A small MNIST-format set: `count` images whose pixels encode the label.
void WriteMnist(const std::string& dir, uint32_t count, uint32_t image_magic = 0x803,
                uint32_t label_count_override = 0) {
  std::ofstream images(dir + "/train-images-idx3-ubyte", std::ios::binary);
  WriteBigEndian32(images, image_magic);
  WriteBigEndian32(images, count);
  WriteBigEndian32(images, 28);
  WriteBigEndian32(images, 28);
  for (uint32_t i = 0; i < count; ++i) {
    std::string pixels(784, '\0');
    for (uint32_t p = (i % 10) * 78; p < (i % 10 + 1) * 78; ++p) pixels[p] = '\xff';
    images.write(pixels.data(), pixels.size());
  }
  std::ofstream labels(dir + "/train-labels-idx1-ubyte", std::ios::binary);
  WriteBigEndian32(labels, 0x801);
  WriteBigEndian32(labels, label_count_override ? label_count_override : count);
  for (uint32_t i = 0; i < count; ++i) labels.put(static_cast<char>(i % 10));
}

TEST_F(TrainerTest, ReadsMnistIdxFiles) {
  WriteMnist(dir_, 200);
  Result r = RunToEnd({"--mnist", dir_, "--steps", "40", "--warmup", "1", "--batch-size", "20",
                       "--workers", "2", "--lr", "0.05"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto fields = ParseSummary(r.out);
  EXPECT_EQ(fields["data"], "mnist");
  // The bands make the digits separable: a working reader lets the model fit.
  EXPECT_LT(std::stod(fields["loss"]), 1.5);
}

TEST_F(TrainerTest, RejectsMalformedMnist) {
  WriteMnist(dir_, 50, /*image_magic=*/0x1234);
  Result bad_magic = RunToEnd({"--mnist", dir_, "--steps", "2", "--warmup", "1"});
  EXPECT_EQ(bad_magic.exit_code, 2);
  EXPECT_NE(bad_magic.err.find("magic number 0x00001234"), std::string::npos) << bad_magic.err;

  WriteMnist(dir_, 50, 0x803, /*label_count_override=*/49);
  Result mismatch = RunToEnd({"--mnist", dir_, "--steps", "2", "--warmup", "1"});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.err.find("49 labels for 50 images"), std::string::npos) << mismatch.err;

  WriteMnist(dir_, 50);
  ASSERT_EQ(truncate((dir_ + "/train-images-idx3-ubyte").c_str(), 16 + 784 * 10), 0);
  Result truncated = RunToEnd({"--mnist", dir_, "--steps", "2", "--warmup", "1"});
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_NE(truncated.err.find("the header promises"), std::string::npos) << truncated.err;

  WriteMnist(dir_, 50);
  ASSERT_EQ(rename((dir_ + "/train-labels-idx1-ubyte").c_str(),
                   (dir_ + "/train-labels-idx1-ubyte.gz").c_str()),
            0);
  Result gz = RunToEnd({"--mnist", dir_, "--steps", "2", "--warmup", "1"});
  EXPECT_EQ(gz.exit_code, 2);
  EXPECT_NE(gz.err.find("gunzip it first"), std::string::npos) << gz.err;

  // Also with the option checks: MNIST is 1x28x28.
  Result shape = RunToEnd({"--mnist", dir_, "--image-size", "3x28x28"});
  EXPECT_EQ(shape.exit_code, 2);
}

#ifdef GPUOS_NVTX_RECORDER
TEST_F(TrainerTest, NvtxRangesNestPhasesInsideSteps) {
  const std::string log = dir_ + "/nvtx.log";
  Result r = RunToEnd({"--steps", "5", "--warmup", "1", "--batch-size", "8", "--workers", "1"},
                      {"NVTX_INJECTION64_PATH=" GPUOS_NVTX_RECORDER, "GPUOS_NVTX_LOG=" + log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Rebuild the tree: top-level ranges and the children of each.
  std::vector<std::pair<std::string, std::vector<std::string>>> steps;
  std::vector<std::string> stack;
  std::stringstream lines(ReadFile(log));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("push\t", 0) == 0) {
      const std::string name = line.substr(5);
      if (stack.empty()) steps.push_back({name, {}});
      if (stack.size() == 1) steps.back().second.push_back(name);
      stack.push_back(name);
    } else if (line == "pop") {
      ASSERT_FALSE(stack.empty()) << "pop without push";
      stack.pop_back();
    }
  }
  EXPECT_TRUE(stack.empty()) << "unbalanced ranges";
  ASSERT_EQ(steps.size(), 5u);
  const std::vector<std::string> phases = {"get batch", "copy batch", "forward", "backward",
                                           "optimizer step"};
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].first, "step " + std::to_string(i));
    EXPECT_EQ(steps[i].second, phases) << steps[i].first;
  }
}
#endif

// Ctrl-C at a terminal signals the whole process group; gpuos-trace
// forwards a signal to the trainer alone.  Either way the trainer must stop
// its workers, reap them, and exit 128+SIGINT.
class TrainerSignalTest : public TrainerTest,
                          public ::testing::WithParamInterface<bool> {};

TEST_P(TrainerSignalTest, SigintStopsAndReapsWorkers) {
  const bool signal_group = GetParam();
  // Slow batches (8 x 20 ms of CPU each), so the run is mid-flight.
  Run run = Start({"--steps", "1000", "--warmup", "1", "--batch-size", "8", "--workers", "2",
                   "--preprocess-us", "20000"},
                  {}, /*own_process_group=*/true);
  std::vector<pid_t> workers = WorkerPids(run);
  ASSERT_EQ(workers.size(), 2u);
  std::this_thread::sleep_for(milliseconds(500));
  ASSERT_EQ(kill(signal_group ? -run.pid : run.pid, SIGINT), 0);
  std::optional<int> status = Wait(run.pid, milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << "trainer did not stop after SIGINT";
  ASSERT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGINT);
  EXPECT_NE(ReadFile(run.err_path).find("data workers stopped"), std::string::npos);
  for (pid_t worker : workers) EXPECT_FALSE(ProcessExists(worker)) << worker;
}

INSTANTIATE_TEST_SUITE_P(TrainerOrGroup, TrainerSignalTest, ::testing::Bool());

TEST_F(TrainerTest, SigkilledTrainerTakesItsWorkersWithIt) {
  Run run = Start({"--steps", "1000", "--warmup", "1", "--batch-size", "8", "--workers", "2",
                   "--preprocess-us", "20000"});
  std::vector<pid_t> workers = WorkerPids(run);
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_EQ(kill(run.pid, SIGKILL), 0);
  ASSERT_TRUE(Wait(run.pid).has_value());
  // Re-parented to this subreaper, they must die of PR_SET_PDEATHSIG.
  for (pid_t worker : workers) {
    std::optional<int> status = Wait(worker, milliseconds(10'000));
    EXPECT_TRUE(status.has_value()) << "worker " << worker << " outlived the trainer";
    if (!status) continue;
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
  }
}

TEST_F(TrainerTest, DeadWorkerIsReported) {
  Run run = Start({"--steps", "1000", "--warmup", "1", "--batch-size", "8", "--workers", "2",
                   "--preprocess-us", "20000"});
  std::vector<pid_t> workers = WorkerPids(run);
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_EQ(kill(workers[1], SIGKILL), 0);
  std::optional<int> status = Wait(run.pid, milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << "trainer hung after losing a worker";
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  const std::string err = ReadFile(run.err_path);
  EXPECT_NE(err.find("data worker 1 (pid " + std::to_string(workers[1]) +
                     ") was killed by signal 9"),
            std::string::npos)
      << err;
  EXPECT_FALSE(ProcessExists(workers[0]));
}

}  // namespace
