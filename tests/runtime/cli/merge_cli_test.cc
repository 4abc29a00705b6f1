// `gpuos-trace merge` as a user runs it, with the real binary: two hosts'
// traces with a known clock shift merge into one that report and export
// read, with the shift recovered within the stated bound; two real
// recordings merge with their processes kept apart; bad inputs get one
// line and exit 2, leaving no output.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime_support.h"
#include "support/merge_trace_fixture.h"

namespace gpuos {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// report --format json's "hosts" as "name skew_ns skew_bound_ns basis" lines.
std::vector<std::string> HostsOfReport(const std::string& trace) {
  absl::StatusOr<google::protobuf::Struct> report = rt::JsonReport(trace);
  EXPECT_TRUE(report.ok()) << report.status();
  std::vector<std::string> lines;
  if (!report.ok()) return lines;
  for (const google::protobuf::Value& host : report->fields().at("hosts").list_value().values()) {
    const rt::JsonFields& h = host.struct_value().fields();
    lines.push_back(absl::StrCat(h.at("name").string_value(), " ", static_cast<int64_t>(h.at("skew_ns").number_value()),
                                 " ", static_cast<uint64_t>(h.at("skew_bound_ns").number_value()), " ",
                                 h.at("skew_basis").string_value()));
  }
  return lines;
}

TEST(MergeCli, KnownClockShiftIsRecoveredAndTheResultReportsAndExports) {
  rt::TempDir dir;
  const int64_t shift = 7'123'456'789;
  ASSERT_EQ(merge_fixture::WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  ASSERT_EQ(merge_fixture::WriteHostTrace(dir.File("b.gpuos"), {"host-b", shift, 0, false, 2}), "");
  rt::RunResult merge = rt::Run({rt::TracerPath(), "merge", dir.File("a.gpuos"), dir.File("b.gpuos"), "-o",
                                 dir.File("job.gpuos")});
  ASSERT_EQ(merge.exit_code, 0) << merge.Describe();
  EXPECT_TRUE(absl::StrContains(merge.err, "host-b")) << merge.err;

  const std::vector<std::string> hosts = HostsOfReport(dir.File("job.gpuos"));
  ASSERT_EQ(hosts.size(), 2u) << absl::StrJoin(hosts, "\n");
  EXPECT_EQ(hosts[0], "host-a 0 0 reference");
  std::istringstream b(hosts[1]);
  std::string name, basis;
  int64_t skew = 0;
  uint64_t bound = 0;
  b >> name >> skew >> bound >> basis;
  EXPECT_EQ(name, "host-b");
  EXPECT_EQ(basis, "wall_clock");
  EXPECT_LE(std::llabs(skew + shift), static_cast<int64_t>(bound)) << hosts[1];

  rt::RunResult text = rt::Run({rt::TracerPath(), "report", dir.File("job.gpuos")});
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_TRUE(absl::StrContains(text.out, "hosts (merged")) << text.out;

  rt::RunResult exported =
      rt::Run({rt::TracerPath(), "export", dir.File("job.gpuos"), "-o", dir.File("job.pftrace")});
  EXPECT_EQ(exported.exit_code, 0) << exported.Describe();
  std::ifstream pftrace(dir.File("job.pftrace"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(pftrace)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(bytes, "[host-a] python3")) << "a process group per host";
  EXPECT_TRUE(absl::StrContains(bytes, "[host-b] python3")) << "a process group per host";
}

TEST(MergeCli, TwoRealRecordingsKeepTheirProcessesApart) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  for (const char* name : {"r1.gpuos", "r2.gpuos"}) {
    rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "-o", dir.File(name), "--", "/bin/sh", "-c", "sleep 0.05"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  rt::RunResult merge =
      rt::Run({rt::TracerPath(), "merge", dir.File("r1.gpuos"), dir.File("r2.gpuos"), "-o", dir.File("job.gpuos")});
  ASSERT_EQ(merge.exit_code, 0) << merge.Describe();
  auto r1 = rt::ReadTrace(dir.File("r1.gpuos"));
  auto r2 = rt::ReadTrace(dir.File("r2.gpuos"));
  auto job = rt::ReadTrace(dir.File("job.gpuos"));
  ASSERT_TRUE(r1.ok() && r2.ok() && job.ok());
  auto tracer_stats = [](const rt::TraceContents& t) {
    size_t n = 0;
    for (const v1::Event& e : t.events) n += e.has_tracer_stats();
    return n;
  };
  ASSERT_GT(tracer_stats(*r1), 0u);
  EXPECT_EQ(job->events.size(), r1->events.size() + r2->events.size() - tracer_stats(*r1) - tracer_stats(*r2) + 1)
      << "every event, the inputs' cumulative TracerStats summed into one";
  EXPECT_EQ(tracer_stats(*job), 1u);
  EXPECT_TRUE(job->has_trailer);
  // One host twice: the wall clocks agree with themselves, so the skew is
  // what NTP moved the clock between the recordings, within the bound.
  const std::vector<std::string> hosts = HostsOfReport(dir.File("job.gpuos"));
  ASSERT_EQ(hosts.size(), 2u);
  std::istringstream second(hosts[1]);
  std::string name, basis;
  int64_t skew = 0;
  uint64_t bound = 0;
  second >> name >> skew >> bound >> basis;
  EXPECT_GT(bound, 0u) << "the pairs' reading uncertainty is recorded";
  EXPECT_LT(bound, 1'000'000u) << hosts[1];
  EXPECT_LT(std::llabs(skew), 1'000'000) << hosts[1];
}

TEST(MergeCli, BadInputsExit2WithOneLineAndNoOutput) {
  rt::TempDir dir;
  ASSERT_EQ(merge_fixture::WriteHostTrace(dir.File("a.gpuos"), {"host-a", 0, 0, false, 1}), "");
  std::ofstream(dir.File("notes.txt")) << "not a trace\n";
  const std::string out = dir.File("job.gpuos");
  struct Case {
    std::vector<std::string> args;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {{"merge", dir.File("a.gpuos"), "-o", out}, "at least two"},
      {{"merge", dir.File("a.gpuos"), dir.File("missing.gpuos"), "-o", out}, "missing.gpuos"},
      {{"merge", dir.File("a.gpuos"), dir.File("notes.txt"), "-o", out}, "not a gpuos-trace file"},
      {{"merge", dir.File("a.gpuos"), dir.File("a.gpuos")}, "-o"},
      {{"merge", "--bogus", dir.File("a.gpuos"), dir.File("a.gpuos"), "-o", out}, "--bogus"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {rt::TracerPath()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(absl::StrJoin(c.args, " "));
    rt::RunResult r = rt::Run(argv);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    const std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_TRUE(absl::StrContains(lines[0], c.mentions)) << lines[0];
    EXPECT_FALSE(Exists(out));
  }
}

}  // namespace
}  // namespace gpuos
