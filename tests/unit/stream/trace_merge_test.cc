// gpuos-trace merge: clocks of two hosts aligned from their
// monotonic/realtime pairs and refined from allreduce ends, ids namespaced
// per host, the result a trace the report reads.  The traces are written
// with the real writer (merge_trace_fixture.h) with a known clock shift.
#include "stream/trace_merge.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "analysis/trace_summary.h"
#include "gtest/gtest.h"
#include "support/merge_trace_fixture.h"
#include "stream/clock_alignment.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

using merge_fixture::HostSpec;
using merge_fixture::WriteHostTrace;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gpuos-merge-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

uint64_t AbsDiff(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

TEST(ClockAlignment, WallClockSkewIsTheDifferenceOfOffsets) {
  v1::ClockPair a, b;
  a.set_monotonic_ns(1'000'000);
  a.set_realtime_ns(5'000'000'000);
  a.set_uncertainty_ns(30);
  b.set_monotonic_ns(8'000'000);  // the same instant, 7 ms later in b's clock
  b.set_realtime_ns(5'000'000'000);
  b.set_uncertainty_ns(50);
  SkewEstimate skew = SkewFromWallClocks(WallClockOffsetOf(a, nullptr), WallClockOffsetOf(b, nullptr));
  EXPECT_EQ(skew.skew_ns, -7'000'000);  // b's time + skew = a's time
  EXPECT_EQ(skew.bound_ns, 80u);
  EXPECT_EQ(skew.basis, "wall_clock");
}

TEST(ClockAlignment, WallClockDriftDuringTheRecordingWidensTheBound) {
  v1::ClockPair start, end;
  start.set_uncertainty_ns(20);
  end.set_uncertainty_ns(30);
  start.set_monotonic_ns(1'000'000'000);
  start.set_realtime_ns(9'000'000'000);
  end.set_monotonic_ns(61'000'000'000);
  end.set_realtime_ns(69'000'200'000);  // NTP moved the wall clock 200 us
  WallClockOffset offset = WallClockOffsetOf(start, &end);
  EXPECT_EQ(offset.offset_ns, 8'000'100'000);
  EXPECT_EQ(offset.uncertainty_ns, 100'030u);
}

TEST(ClockAlignment, APairWithoutAStatedUncertaintyIsNotTakenAsExact) {
  v1::ClockPair old_trace;  // written before pairs stated their uncertainty
  old_trace.set_monotonic_ns(1'000'000);
  old_trace.set_realtime_ns(5'000'000'000);
  EXPECT_GT(WallClockOffsetOf(old_trace, nullptr).uncertainty_ns, 0u);
}

std::vector<uint64_t> PeriodicEnds(uint64_t first, uint64_t period, int n, uint32_t seed, int jitter_ns) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> jitter(-jitter_ns, jitter_ns);
  std::vector<uint64_t> ends;
  for (int i = 0; i < n; ++i) ends.push_back(first + i * period + jitter(random));
  return ends;
}

TEST(ClockAlignment, CollectivesRecoverTheSkewTheWallClocksMissed) {
  const int64_t true_skew = -7'123'456'789;  // host time + true_skew = reference time
  std::vector<uint64_t> reference = PeriodicEnds(50'000'000'000, 97'000'000, 200, 1, 3000);
  std::vector<uint64_t> host;
  // The host's trace starts 5 collectives later and its ends are jittered too.
  for (uint64_t end : PeriodicEnds(50'000'000'000 + 5 * 97'000'000, 97'000'000, 190, 2, 3000)) {
    host.push_back(static_cast<uint64_t>(static_cast<int64_t>(end) - true_skew));
  }
  SkewEstimate coarse;
  coarse.skew_ns = true_skew + 4'000'000;  // the wall clocks disagree by 4 ms
  coarse.bound_ns = 100;
  auto refined = RefineSkewFromCollectives(reference, host, coarse);
  ASSERT_TRUE(refined.has_value());
  EXPECT_EQ(refined->basis, "collectives");
  EXPECT_GE(refined->collectives_matched, 180u);
  EXPECT_LE(AbsDiff(refined->skew_ns, true_skew), refined->bound_ns);
  EXPECT_LE(refined->bound_ns, 6000u);  // two jitters of 3 us
  EXPECT_GT(refined->bound_ns, 0u);
}

TEST(ClockAlignment, TooFewCollectivesLeaveTheWallClockEstimate) {
  SkewEstimate coarse;
  EXPECT_FALSE(RefineSkewFromCollectives({1, 2}, {1, 2, 3}, coarse).has_value());
  // Ends that pair with nothing (far apart) do not refine either.
  EXPECT_FALSE(RefineSkewFromCollectives({1000, 2000, 3000}, {5'000'000, 6'000'000, 7'000'000}, coarse)
                   .has_value());
}

// Two gloo allreduce waits per 80 ms step, 40 ms apart, ending together on
// both ranks up to 50 us of wakeup jitter.  The host's trace starts 5 steps
// later (its step 0 is the reference's step 5), misses the last wait of one
// step and has an extra wait in another; the wall clocks are 25 ms off:
// more than half the spacing of the ends, less than half a step.
TEST(ClockAlignment, CpuCollectivesPairByStepThenByTheDifferenceTheStepsShare) {
  const int64_t true_skew = -3'210'987'654;  // host time + true_skew = reference time
  std::mt19937 random(7);
  std::uniform_int_distribution<int> jitter(-50'000, 50'000);
  std::vector<StepCollectiveEnds> reference, host;
  for (uint64_t step = 0; step < 60; ++step) {
    const uint64_t start = 10'000'000'000 + step * 80'000'000;
    StepCollectiveEnds r{step, {}}, h{step >= 5 ? step - 5 : 0, {}};
    for (uint64_t at : {30'000'000u, 70'000'000u}) {
      r.ends_ns.push_back(start + at + jitter(random));
      h.ends_ns.push_back(static_cast<uint64_t>(static_cast<int64_t>(start + at + jitter(random)) - true_skew));
    }
    reference.push_back(r);
    if (step < 5) continue;
    if (step == 20) h.ends_ns.pop_back();
    if (step == 30) h.ends_ns.insert(h.ends_ns.begin() + 1, h.ends_ns[0] + 9'000'000);
    host.push_back(h);
  }
  SkewEstimate coarse;
  coarse.skew_ns = true_skew + 25'000'000;
  coarse.bound_ns = 100;
  auto refined = RefineSkewFromStepCollectives(reference, host, coarse);
  ASSERT_TRUE(refined.has_value());
  EXPECT_EQ(refined->basis, "cpu_collectives");
  EXPECT_EQ(refined->collectives_matched, 55u) << "every paired step, the one missing a wait included";
  EXPECT_LE(AbsDiff(refined->skew_ns, true_skew), refined->bound_ns);
  // Two jitters of 50 us either way, and the allowance for a common lag.
  EXPECT_GT(refined->bound_ns, kSameExchangeNs);
  EXPECT_LE(refined->bound_ns, kSameExchangeNs + 200'000u);
  // Without the steps, the ends alone pair one collective off.
  std::vector<uint64_t> flat_reference, flat_host;
  for (const auto& r : reference) flat_reference.insert(flat_reference.end(), r.ends_ns.begin(), r.ends_ns.end());
  for (const auto& h : host) flat_host.insert(flat_host.end(), h.ends_ns.begin(), h.ends_ns.end());
  auto flat = RefineSkewFromCollectives(flat_reference, flat_host, coarse);
  ASSERT_TRUE(flat.has_value());
  EXPECT_GT(AbsDiff(flat->skew_ns, true_skew), 30'000'000u);
}

TEST(ClockAlignment, TooFewCpuCollectivesLeaveTheWallClockEstimate) {
  SkewEstimate coarse;
  EXPECT_FALSE(RefineSkewFromStepCollectives({{0, {1000, 2000}}}, {{0, {1000, 2000}}}, coarse).has_value());
  EXPECT_FALSE(RefineSkewFromStepCollectives({}, {{0, {1000, 2000, 3000}}}, coarse).has_value());
  // Steps with no ends pair with nothing.
  EXPECT_FALSE(RefineSkewFromStepCollectives({{0, {}}, {1, {}}}, {{0, {}}, {1, {}}}, coarse).has_value());
}

// The merged file's events by (ts, pid, tid, kind).
struct MergedContents {
  v1::TraceHeader header;
  std::vector<v1::Event> events;
  bool has_trailer = false;
};

MergedContents ReadMerged(const std::string& path) {
  MergedContents out;
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  out.header = (*reader)->header();
  EXPECT_TRUE(ForEachEvent(
                  **reader, [&](const v1::Event& e) { out.events.push_back(e); },
                  [&](const v1::TraceTrailer&) { out.has_trailer = true; })
                  .ok());
  return out;
}

TEST(TraceMerge, RecoversAKnownClockShiftFromTheClockPairs) {
  TempDir dir;
  const int64_t shift = 7'123'456'789;  // host b's monotonic is this far ahead
  ASSERT_EQ(WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  ASSERT_EQ(WriteHostTrace(dir.File("b.gpuos"), {"host-b", shift, 0, false, 2}), "");
  auto result = MergeTraces({dir.File("a.gpuos"), dir.File("b.gpuos")}, dir.File("job.gpuos"));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->hosts.size(), 2u);
  EXPECT_EQ(result->hosts[0].skew_ns(), 0);
  EXPECT_EQ(result->hosts[0].skew_basis(), "reference");
  const v1::MergedHost& b = result->hosts[1];
  EXPECT_EQ(b.hostname(), "host-b");
  EXPECT_EQ(b.skew_basis(), "wall_clock");
  EXPECT_LE(AbsDiff(b.skew_ns(), -shift), b.skew_bound_ns());
  EXPECT_EQ(b.skew_bound_ns(), 80u);  // the two pairs' 40 ns each

  MergedContents merged = ReadMerged(dir.File("job.gpuos"));
  EXPECT_TRUE(merged.has_trailer);
  ASSERT_TRUE(merged.header.has_merged());
  EXPECT_EQ(merged.header.merged().hosts_size(), 2);
  // Every event of host b lands where host a's twin is, to the bound.
  std::map<std::pair<int, uint64_t>, int> by_kind_and_ts;
  uint64_t previous = 0;
  for (const v1::Event& e : merged.events) {
    EXPECT_GE(e.ts_ns(), previous) << "merged by timestamp";
    previous = e.ts_ns();
    ++by_kind_and_ts[{e.payload_case(), e.ts_ns()}];
  }
  for (const auto& [key, n] : by_kind_and_ts) {
    EXPECT_EQ(n, 2) << "event kind " << key.first << " at " << key.second << " not paired";
  }
}

TEST(TraceMerge, CollectivesCorrectAWallClockError) {
  TempDir dir;
  const int64_t shift = -3'500'000'000;  // host b booted later
  // host b's wall clock is 3 ms fast: the pairs alone are 3 ms off.
  ASSERT_EQ(WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, true, 1}), "");
  ASSERT_EQ(WriteHostTrace(dir.File("b.gpuos"), {"host-b", shift, 3'000'000, true, 2}), "");
  auto result = MergeTraces({dir.File("a.gpuos"), dir.File("b.gpuos")}, dir.File("job.gpuos"));
  ASSERT_TRUE(result.ok()) << result.status();
  const v1::MergedHost& b = result->hosts[1];
  EXPECT_EQ(b.skew_basis(), "collectives");
  EXPECT_EQ(b.collectives_matched(), static_cast<uint32_t>(merge_fixture::kSteps));
  EXPECT_LE(AbsDiff(b.skew_ns(), -shift), b.skew_bound_ns());
  EXPECT_LE(b.skew_bound_ns(), 8000u);
}

TEST(TraceMerge, SamePidsOnTwoHostsStayTwoProcesses) {
  TempDir dir;
  ASSERT_EQ(WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  ASSERT_EQ(WriteHostTrace(dir.File("b.gpuos"), {"host-b", 1'000'000, 0, false, 2}), "");
  ASSERT_TRUE(MergeTraces({dir.File("a.gpuos"), dir.File("b.gpuos")}, dir.File("job.gpuos")).ok());
  MergedContents merged = ReadMerged(dir.File("job.gpuos"));
  std::set<uint32_t> pids, starts, wakers, fault_tids;
  for (const v1::Event& e : merged.events) {
    pids.insert(e.pid());
    if (e.has_process_start()) starts.insert(e.pid());
    if (e.has_off_cpu()) {
      wakers.insert(e.off_cpu().woken_by_tid());
      EXPECT_EQ(e.off_cpu().waker_pid(), e.pid()) << "the waker is in the woken thread's process";
    }
    if (e.has_page_faults()) {
      fault_tids.insert(e.tid());
      EXPECT_EQ(e.page_faults().last_ns() - e.ts_ns(), 880'000u) << "absolute times move with ts";
    }
  }
  const uint32_t b_pid = kMergedPidStride + 100;
  EXPECT_EQ(pids, (std::set<uint32_t>{100, b_pid}));
  EXPECT_EQ(starts, (std::set<uint32_t>{100, b_pid}));
  EXPECT_EQ(wakers, (std::set<uint32_t>{101, kMergedPidStride + 101}));
  EXPECT_EQ(fault_tids, (std::set<uint32_t>{101, kMergedPidStride + 101}));

  // The report's summary sees two processes, one per host.
  auto summary = SummarizeTrace(dir.File("job.gpuos"));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->os.processes.size(), 2u);
  EXPECT_TRUE(summary->os.incomplete_reason.empty()) << summary->os.incomplete_reason;
}

TEST(TraceMerge, ADamagedInputIsMergedUpToTheDamageAndTheResultSaysIncomplete) {
  TempDir dir;
  ASSERT_EQ(WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  ASSERT_EQ(WriteHostTrace(dir.File("b.gpuos"), {"host-b", 1'000'000, 0, false, 2}), "");
  struct stat st;
  ASSERT_EQ(stat(dir.File("b.gpuos").c_str(), &st), 0);
  ASSERT_EQ(truncate(dir.File("b.gpuos").c_str(), st.st_size - 10), 0);  // into its trailer
  auto result = MergeTraces({dir.File("a.gpuos"), dir.File("b.gpuos")}, dir.File("job.gpuos"));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->warnings.size(), 1u);
  EXPECT_NE(result->warnings[0].find("b.gpuos is damaged"), std::string::npos) << result->warnings[0];
  MergedContents merged = ReadMerged(dir.File("job.gpuos"));
  EXPECT_FALSE(merged.has_trailer) << "a merge of a damaged input must not read as complete";
  auto summary = SummarizeTrace(dir.File("job.gpuos"));
  ASSERT_TRUE(summary.ok());
  EXPECT_FALSE(summary->os.incomplete_reason.empty());
}

TEST(TraceMerge, BadInputsAreOneLineErrors) {
  TempDir dir;
  ASSERT_EQ(WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  {
    FILE* f = fopen(dir.File("notes.txt").c_str(), "w");
    fputs("not a trace\n", f);
    fclose(f);
  }
  struct Case {
    std::vector<std::string> inputs;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {{dir.File("a.gpuos")}, "at least two"},
      {{dir.File("a.gpuos"), dir.File("missing.gpuos")}, "missing.gpuos"},
      {{dir.File("a.gpuos"), dir.File("notes.txt")}, "not a gpuos-trace file"},
      {{dir.File("a.gpuos"), dir.File("job.gpuos")}, "job.gpuos"},
  };
  for (const Case& c : cases) {
    auto result = MergeTraces(c.inputs, dir.File("job.gpuos"));
    ASSERT_FALSE(result.ok()) << c.mentions;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(result.status().message());
    EXPECT_NE(message.find(c.mentions), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  ASSERT_EQ(WriteHostTrace(dir.File("b.gpuos"), {"host-b", 0, 0, false, 2}), "");
  auto onto_input = MergeTraces({dir.File("a.gpuos"), dir.File("b.gpuos")}, dir.File("b.gpuos"));
  ASSERT_FALSE(onto_input.ok());
  EXPECT_NE(onto_input.status().message().find("also an input"), std::string::npos) << onto_input.status();
}

}  // namespace
}  // namespace gpuos
