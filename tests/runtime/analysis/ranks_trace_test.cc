// Ranks of a distributed job, end to end on the CPU: a DDP job of gloo
// ranks (Debian's python3-torch; workloads/ddp/), started by a launcher
// that sets torchrun's variables, traced by the real gpuos-trace --
// launched, and attached with --pid on the launcher -- and reported.
// Every rank must be found with its number and world size, have its own
// steps, and show its waits in DDP's allreduce as communication; the rank
// slowed on purpose (extra preprocessing in its data loading) must be
// named the straggler, with data loading as its cause and a cost per step
// near the extra time.  Needs root (eBPF) and python3-torch; skips without.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/straggler.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "runtime_support.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

rt::RunOptions Within(double seconds) {
  rt::RunOptions options;
  options.timeout_s = seconds;
  return options;
}

const char* kPython = "/usr/bin/python3";
const std::string kDdp = std::string(GPUOS_SOURCE_DIR) + "/workloads/ddp";
constexpr double kExtraMs = 40;

using Fields = rt::JsonFields;

google::protobuf::Struct JsonReport(const std::string& trace) {
  absl::StatusOr<google::protobuf::Struct> j = rt::JsonReport(trace);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *std::move(j) : google::protobuf::Struct();
}

std::vector<std::string> Job(int nproc, int steps, int slow_rank, const std::string& ready_file = "") {
  std::vector<std::string> argv = {kPython, kDdp + "/launch_ranks.py", "--nproc", absl::StrCat(nproc), "--",
                                   kDdp + "/train_ddp.py", "--steps", absl::StrCat(steps), "--slow-rank",
                                   absl::StrCat(slow_rank), "--extra-preprocess-ms", absl::StrCat(kExtraMs)};
  if (!ready_file.empty()) argv.insert(argv.end(), {"--ready-file", ready_file});
  return argv;
}

// What every traced DDP job must show: each rank once, with its steps and
// its communication, and the slowed rank as the straggler.
// `causes`: what the straggler's cause may be named.  Attached, the Python
// hooks are not in the job, so its data fetches are not marked and its
// extra preprocessing reads as CPU work of the loop.
// `min_wait`: the share of the extra time the other ranks must be seen
// waiting per step.  Attached, steps are inferred from the CPU activity,
// which may split a rank's step in two (the report's ranks_note says so),
// halving its per-step figures.
// `local_ranks`: the ranks had LOCAL_RANK (launched by torchrun's rules;
// torch.multiprocessing.spawn sets none, and none is made up).
void ExpectRanks(const google::protobuf::Struct& report, int nproc, int slow_rank, double min_steps,
                 const std::set<std::string>& causes, double min_wait, bool local_ranks = true) {
  const auto& ranks = report.fields().at("ranks").list_value().values();
  ASSERT_EQ(ranks.size(), static_cast<size_t>(nproc)) << "every rank, once";
  std::set<int> numbers;
  std::set<double> pids;
  for (const auto& v : ranks) {
    const Fields& r = v.struct_value().fields();
    const int rank = static_cast<int>(r.at("rank").number_value());
    SCOPED_TRACE(absl::StrCat("rank ", rank));
    numbers.insert(rank);
    pids.insert(r.at("pid").number_value());
    EXPECT_EQ(r.at("world_size").number_value(), nproc);
    if (local_ranks) {
      EXPECT_EQ(r.at("local_rank").number_value(), rank);
    } else {
      EXPECT_EQ(r.at("local_rank").kind_case(), google::protobuf::Value::kNullValue);
    }
    EXPECT_FALSE(r.at("host").string_value().empty());
    EXPECT_GE(r.at("steps").number_value(), min_steps) << "its own steps";
    EXPECT_GT(r.at("step_ns").struct_value().fields().at("mean").number_value(), 0);
    EXPECT_EQ(r.at("gpu").kind_case(), google::protobuf::Value::kNullValue) << "a CPU job";
    EXPECT_GT(r.at("comm_ns").number_value(), 0) << "allreduce waits recorded as communication";
    EXPECT_GE(r.at("comm_ns").number_value(), r.at("exposed_comm_ns").number_value());
    const auto& stages = r.at("stage_ns").struct_value().fields();
    EXPECT_TRUE(stages.contains("communication")) << "the stage";
    ASSERT_TRUE(stages.contains("exposed_communication"));
    EXPECT_DOUBLE_EQ(stages.at("exposed_communication").number_value(), r.at("exposed_comm_ns").number_value());
    if (rank != slow_rank) {
      // It waited for the slowed rank's extra preprocessing every step.
      EXPECT_GE(r.at("exposed_comm_ns").number_value(), min_wait * kExtraMs * 1e6);
    }
  }
  EXPECT_EQ(numbers.size(), static_cast<size_t>(nproc));
  EXPECT_EQ(pids.size(), static_cast<size_t>(nproc));
  const auto& straggler = report.fields().at("straggler");
  ASSERT_EQ(straggler.kind_case(), google::protobuf::Value::kStructValue) << "a straggler named";
  const Fields& s = straggler.struct_value().fields();
  EXPECT_EQ(s.at("rank").number_value(), slow_rank);
  EXPECT_EQ(causes.count(s.at("cause").string_value()), 1u) << s.at("cause_detail").string_value();
  // On a loaded 2-CPU machine the ranks also wait for each other at random
  // (preemption), which narrows the measured difference.
  EXPECT_GE(s.at("cost_ns_per_step").number_value(), 0.25 * kExtraMs * 1e6);
  EXPECT_LE(s.at("cost_ns_per_step").number_value(), 2.0 * kExtraMs * 1e6);
  // The diagnosis names it too.
  const Fields& d = report.fields().at("diagnosis").struct_value().fields();
  bool named = d.at("bottleneck").string_value() == "straggler";
  for (const auto& f : d.at("secondary").list_value().values()) {
    named |= f.struct_value().fields().at("bottleneck").string_value() == "straggler";
  }
  EXPECT_TRUE(named) << "the diagnosis has the straggler finding";
}

// One rank's part of a trace of the whole job, written as if that rank had
// been traced on a host of its own: the rank's processes (and those of no
// rank, the launcher), every timestamp `shift_ns` later, and the clock
// pairs `pair_shift_ns` later (a host whose wall clock is off by the
// difference).  Returns "" or what failed.
std::string WriteRankTrace(const rt::TraceContents& job, int rank, const std::string& hostname, int64_t shift_ns,
                           int64_t pair_shift_ns, const std::string& path) {
  std::map<uint32_t, uint32_t> parent;
  std::map<uint32_t, int> rank_of;
  for (const v1::Event& e : job.events) {
    if (e.has_process_start()) parent[e.pid()] = e.process_start().ppid();
    if (e.has_rank_info() && e.rank_info().has_rank()) rank_of[e.pid()] = e.rank_info().rank();
  }
  auto owner = [&](uint32_t pid) {
    for (int hops = 0; pid != 0 && hops < 64; ++hops) {
      if (auto it = rank_of.find(pid); it != rank_of.end()) return it->second;
      auto up = parent.find(pid);
      if (up == parent.end()) break;
      pid = up->second;
    }
    return -1;
  };
  auto shifted = [](uint64_t ns, int64_t by) { return ns ? static_cast<uint64_t>(static_cast<int64_t>(ns) + by) : 0; };
  auto writer = TraceWriter::Create(path);
  if (!writer.ok()) return std::string(writer.status().message());
  v1::TraceHeader header = job.header;
  header.set_hostname(hostname);
  header.mutable_start_clock()->set_monotonic_ns(shifted(header.start_clock().monotonic_ns(), pair_shift_ns));
  if (!(*writer)->WriteHeader(header).ok()) return "header";
  for (v1::Event e : job.events) {
    const int r = owner(e.pid());
    if (r != -1 && r != rank) continue;
    e.set_ts_ns(shifted(e.ts_ns(), shift_ns));
    if (e.has_page_faults()) e.mutable_page_faults()->set_last_ns(shifted(e.page_faults().last_ns(), shift_ns));
    if (!(*writer)->Append(e).ok()) return "append";
  }
  if (!job.has_trailer) return "the job's trace has no trailer";
  v1::TraceTrailer trailer = job.trailer;
  trailer.mutable_end_clock()->set_monotonic_ns(shifted(trailer.end_clock().monotonic_ns(), pair_shift_ns));
  if (!(*writer)->WriteTrailer(trailer).ok() || !(*writer)->Close().ok()) return "trailer";
  return "";
}

class RanksTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GPUOS_REQUIRE_ROOT();
    if (system((std::string(kPython) + " -c 'import torch.distributed' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << kPython << " has no torch (apt-get install python3-torch)";
    }
    dir_.MakeWorldWritable();
  }
  rt::TempDir dir_;
};

TEST_F(RanksTraceTest, LaunchedThreeRanksOneSlowed) {
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", dir_.File("ddp.gpuos"), "--"};
  for (const std::string& a : Job(3, 30, 1)) argv.push_back(a);
  rt::RunResult run = rt::Run(argv, Within(240));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  ExpectRanks(JsonReport(dir_.File("ddp.gpuos")), 3, 1, 20, {"data_loader"}, 0.5);

  // The export names each rank's process by its rank, so a job's ranks
  // read as one group in the timeline.
  rt::RunResult exported = rt::Run({rt::TracerPath(), "export", dir_.File("ddp.gpuos"), "-o",
                                    dir_.File("ddp.pftrace")},
                                   Within(120));
  ASSERT_EQ(exported.exit_code, 0) << exported.Describe();
  const std::string timeline = rt::ReadFile(dir_.File("ddp.pftrace")).value_or("");
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(timeline.find(absl::StrCat("rank ", rank, "/3 python")), std::string::npos) << "rank " << rank;
  }
}

// Ranks started by torch.multiprocessing.spawn (PyTorch's DDP tutorial) get
// their rank as an argument, in no environment variable: the Python hook
// names them once init_process_group returns.
TEST_F(RanksTraceTest, SpawnedRanksAreNamedByThePythonHook) {
  const std::string trace = dir_.File("spawned.gpuos");
  rt::RunResult run = rt::Run({rt::TracerPath(), "-q", "-o", trace, "--", kPython, kDdp + "/train_ddp.py", "--spawn",
                               "2", "--steps", "30", "--slow-rank", "1", "--extra-preprocess-ms",
                               absl::StrCat(kExtraMs)},
                              Within(240));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  ExpectRanks(JsonReport(trace), 2, 1, 20, {"data_loader"}, 0.5, /*local_ranks=*/false);

  // Without the hook nothing says which process is which rank: no ranks,
  // rather than guessed ones.
  const std::string bare = dir_.File("spawned-nohooks.gpuos");
  run = rt::Run({rt::TracerPath(), "-q", "--no-python-hooks", "-o", bare, "--", kPython, kDdp + "/train_ddp.py",
                 "--spawn", "2", "--steps", "10"},
                Within(240));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_EQ(JsonReport(bare).fields().at("ranks").list_value().values_size(), 0);
}

// Each rank's "rank R steps N mean_step_ms M loop_cpu_ms C" line: its mean
// step and its training thread's own CPU time per step.  The ranks print at
// the same moment and their lines can run together, so the fields are
// searched for anywhere in the output.
struct RankTiming {
  double step_ms = 0;
  double cpu_ms = 0;
};
std::map<int, RankTiming> RankTimings(const std::string& out) {
  static const std::regex kLine(R"(rank (\d+) steps \d+ mean_step_ms ([0-9.]+) loop_cpu_ms ([0-9.]+))");
  std::map<int, RankTiming> timings;
  for (std::sregex_iterator m(out.begin(), out.end(), kLine), end; m != end; ++m) {
    timings[std::stoi((*m)[1])] = {std::stod((*m)[2]), std::stod((*m)[3])};
  }
  return timings;
}

// No rank slowed: no straggler is named, and the diagnosis has no
// straggler finding (the ranks still wait for each other a little).
// "Balanced" is judged by the job's own account: on a 2-CPU machine one
// rank can really need more CPU time a step than the other (it shares a
// CPU with the tracer or the other rank's threads), and then naming it is
// right.  So: no straggler when the ranks' own CPU times per step differ by
// less than the rule's smallest straggler cost (max(1 ms, 10% of the step))
// unless the kernel saw it held back (an OS cause: preemption, faults...);
// with a larger gap, only the rank that needed more CPU time.
TEST_F(RanksTraceTest, LaunchedBalancedRanksHaveNoStraggler) {
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", dir_.File("balanced.gpuos"), "--"};
  for (const std::string& a : Job(2, 40, -1)) argv.push_back(a);
  rt::RunResult run = rt::Run(argv, Within(240));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::map<int, RankTiming> timing = RankTimings(run.out);
  ASSERT_EQ(timing.size(), 2u) << run.Describe();
  const double cpu_gap_ms = std::abs(timing.at(0).cpu_ms - timing.at(1).cpu_ms);
  const double smallest_cost_ms =
      std::max(kStragglerMinNs / 1e6, kStragglerMinShare * std::max(timing.at(0).step_ms, timing.at(1).step_ms));
  const std::string cpu_text =
      absl::StrCat("loop CPU ms per step: rank 0 ", timing.at(0).cpu_ms, ", rank 1 ", timing.at(1).cpu_ms);
  const google::protobuf::Struct report = JsonReport(dir_.File("balanced.gpuos"));
  ASSERT_EQ(report.fields().at("ranks").list_value().values_size(), 2);
  const auto& straggler = report.fields().at("straggler");
  const bool named = straggler.kind_case() == google::protobuf::Value::kStructValue;
  if (cpu_gap_ms >= smallest_cost_ms) {
    const int slower = timing.at(0).cpu_ms > timing.at(1).cpu_ms ? 0 : 1;
    if (named) EXPECT_EQ(straggler.struct_value().fields().at("rank").number_value(), slower) << cpu_text;
    return;
  }
  const std::set<std::string> kOsCauses = {"preemption", "page_faults", "mmap_munmap", "blocking_syscalls"};
  if (named && kOsCauses.count(straggler.struct_value().fields().at("cause").string_value()) > 0) return;
  EXPECT_FALSE(named) << straggler.struct_value().fields().at("cause_detail").string_value() << "; " << cpu_text;
  const Fields& d = report.fields().at("diagnosis").struct_value().fields();
  EXPECT_NE(d.at("bottleneck").string_value(), "straggler");
  for (const auto& f : d.at("secondary").list_value().values()) {
    EXPECT_NE(f.struct_value().fields().at("bottleneck").string_value(), "straggler");
  }
}

TEST_F(RanksTraceTest, AttachedToTheLauncher) {
  const std::string ready = dir_.File("ready");
  rt::Child job = rt::Child::Start(Job(2, 400, 0, ready));
  ASSERT_TRUE(rt::WaitUntil([&] { return access(ready.c_str(), F_OK) == 0; }, 180)) << "the job never started";
  rt::RunResult attach = rt::Run({rt::TracerPath(), "-q", "--pid", absl::StrCat(job.pid()), "--duration", "6s",
                                  "-o", dir_.File("attached.gpuos")},
                                 Within(120));
  ASSERT_EQ(attach.exit_code, 0) << attach.Describe();
  job.Signal(SIGTERM);
  job.Wait(60);
  ExpectRanks(JsonReport(dir_.File("attached.gpuos")), 2, 0, 10, {"data_loader", "cpu_work"}, 0.25);
}

// `gpuos-trace merge` of two ranks' traces of one gloo job, the second
// rank's clock 5.015 s ahead while its clock pairs say 5 s: the wall clocks
// alone are 15 ms off, and the ends of the ranks' waits in the allreduce
// must recover the shift within the bound the merge states.  The two
// "hosts" are one real recording split by rank (both ran here, so the true
// shift is exactly the one applied).
TEST_F(RanksTraceTest, MergedRanksAlignFromTheirGlooCollectives) {
  const std::string job_trace = dir_.File("ddp.gpuos");
  std::vector<std::string> argv = {rt::TracerPath(), "-q", "-o", job_trace, "--", kPython,
                                   kDdp + "/launch_ranks.py", "--nproc", "2", "--", kDdp + "/train_ddp.py",
                                   "--steps", "40", "--slow-rank", "1", "--extra-preprocess-ms", "80"};
  rt::RunResult run = rt::Run(argv, Within(240));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  absl::StatusOr<rt::TraceContents> job = rt::ReadTrace(job_trace);
  ASSERT_TRUE(job.ok()) << job.status();
  constexpr int64_t kShift = 5'015'000'000;
  constexpr int64_t kPairShift = 5'000'000'000;
  ASSERT_EQ(WriteRankTrace(*job, 0, "host-a", 0, 0, dir_.File("a.gpuos")), "");
  ASSERT_EQ(WriteRankTrace(*job, 1, "host-b", kShift, kPairShift, dir_.File("b.gpuos")), "");
  rt::RunResult merge = rt::Run(
      {rt::TracerPath(), "merge", dir_.File("a.gpuos"), dir_.File("b.gpuos"), "-o", dir_.File("job.gpuos")},
      Within(120));
  ASSERT_EQ(merge.exit_code, 0) << merge.Describe();

  const google::protobuf::Struct report = JsonReport(dir_.File("job.gpuos"));
  const auto& hosts = report.fields().at("hosts").list_value().values();
  ASSERT_EQ(hosts.size(), 2u);
  const Fields& b = hosts[1].struct_value().fields();
  SCOPED_TRACE(merge.err);
  EXPECT_EQ(b.at("skew_basis").string_value(), "cpu_collectives");
  EXPECT_GE(b.at("collectives_matched").number_value(), 20) << "about one allreduce wait per step";
  const double skew = b.at("skew_ns").number_value();
  const double bound = b.at("skew_bound_ns").number_value();
  EXPECT_LE(std::abs(skew + kShift), bound) << "the true shift within the stated bound";
  EXPECT_LT(bound, kShift - kPairShift) << "better than the wall clocks";
  EXPECT_EQ(report.fields().at("ranks").list_value().values_size(), 2) << "the merged trace reports both ranks";
}

}  // namespace
}  // namespace gpuos
