// A trace file that cannot be written (a full file system) never makes a
// trace lie: the traced job runs on unharmed, the tracer says what it lost,
// and the file it leaves reads as incomplete -- with the error, when it
// happened and the events lost by kind -- in report (text, JSON), export
// and dump, first thing.  Needs root (eBPF, mount).
#include <sys/mount.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "analysis/os_summary.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

// A tmpfs of `bytes`, unmounted at the end.
class SmallFileSystem {
 public:
  SmallFileSystem(const std::string& dir, const std::string& size) : dir_(dir) {
    mounted_ = mount("gpuos-test", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFileSystem() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(TraceWriteFailure, FullFileSystemIsReportedNotHidden) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string small = dir.File("small");
  ASSERT_TRUE(rt::Run({"/bin/mkdir", small}).exit_code == 0);
  SmallFileSystem fs(small, "256k");
  ASSERT_TRUE(fs.mounted()) << "cannot mount a tmpfs";
  const std::string trace = small + "/run.gpuos";
  const std::string job_report = dir.File("job.txt");

  // Far more than 256 KiB of events: mmap/munmap and futex calls, sleeps.
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "-o", trace, "--", rt::WorkloadPath("ground_truth"), "--threads",
                             "4", "--workers", "1", "--mmaps", "3000", "--futex-waits", "500", "--futex-wakes", "500",
                             "--report", job_report},
                            {.timeout_s = 120});
  // The job was not hurt: it ran to its end and its status passed through.
  ASSERT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  const auto lines = rt::ReadGroundTruthReport(job_report);
  EXPECT_FALSE(lines.empty()) << "the job did not finish its own report";
  // The tracer says what it lost.
  EXPECT_TRUE(absl::StrContains(r.err, "No space left on device") && absl::StrContains(r.err, "events lost"))
      << r.Describe();

  auto summary = SummarizeTraceFile(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->incomplete_reason.empty());
  EXPECT_GT(summary->dropped_events, 0u);
  bool write_drops = false;
  for (const auto& [reason, n] : summary->drops_by_reason) write_drops |= absl::StartsWith(reason, "write_failed:") && n > 0;
  EXPECT_TRUE(write_drops) << "no write_failed:<kind> drop reason";
  if (summary->has_trailer) {
    // The trailer made it: it carries the failure itself.
    ASSERT_TRUE(summary->trailer.has_write_failure());
    EXPECT_GT(summary->trailer.write_failure().lost_events(), 0u);
    EXPECT_TRUE(absl::StrContains(summary->incomplete_reason, "No space left on device")) << summary->incomplete_reason;
    EXPECT_GE(summary->trailer.write_failure().at_ns(), summary->header.start_clock().monotonic_ns());
  }

  rt::RunResult text = rt::Run({rt::TracerPath(), "report", trace});
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  std::vector<std::string> first = absl::StrSplit(text.out, '\n');
  ASSERT_GE(first.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(first[1], "  INCOMPLETE: ")) << text.out.substr(0, 400);

  rt::RunResult json = rt::Run({rt::TracerPath(), "report", trace, "--format", "json"});
  EXPECT_TRUE(absl::StrContains(json.out, "\"complete\": false")) << json.out.substr(0, 600);
  EXPECT_TRUE(absl::StrContains(json.out, "\"write_failed:")) << json.out.substr(0, 600);

  rt::RunResult exported = rt::Run({rt::TracerPath(), "export", trace, "-o", dir.File("run.pftrace")});
  EXPECT_EQ(exported.exit_code, 0) << exported.Describe();
  ASSERT_FALSE(exported.ErrLines().empty());
  EXPECT_TRUE(absl::StrContains(exported.ErrLines().front(), "is incomplete")) << exported.Describe();

  rt::RunResult dump = rt::Run({rt::TracerPath(), "dump", trace});
  ASSERT_FALSE(dump.ErrLines().empty());
  EXPECT_TRUE(absl::StrContains(dump.ErrLines().front(), "is incomplete")) << dump.err;
}

// --max-size: the file stops growing at the cap (plus the small trailer),
// and the trace says why it ends there.
TEST(TraceWriteFailure, SizeCapStopsRecordingAndSaysSo) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  constexpr uint64_t kCap = 128 * 1024;
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "--max-size", "128K", "-o", trace, "--",
                             rt::WorkloadPath("ground_truth"), "--threads", "4", "--mmaps", "3000", "--report",
                             dir.File("job.txt")},
                            {.timeout_s = 120});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  const uint64_t size = rt::ReadFile(trace).value_or("").size();
  EXPECT_LE(size, kCap + 4096) << "the file grew past the cap";
  EXPECT_GT(size, kCap / 2) << "the cap stopped recording far too early";
  auto summary = SummarizeTraceFile(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_TRUE(summary->has_trailer) << "the trailer is exempt from the cap";
  EXPECT_TRUE(absl::StrContains(summary->incomplete_reason, "--max-size")) << summary->incomplete_reason;
  EXPECT_GT(summary->trailer.write_failure().lost_events(), 0u);
}

// A whole trace says nothing of the kind.
TEST(TraceWriteFailure, CompleteTraceHasNoWarning) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("run.gpuos");
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "-o", trace, "--", rt::WorkloadPath("ground_truth"), "--threads",
                             "1", "--report", dir.File("job.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto summary = SummarizeTraceFile(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->incomplete_reason, "");
  rt::RunResult json = rt::Run({rt::TracerPath(), "report", trace, "--format", "json"});
  EXPECT_TRUE(absl::StrContains(json.out, "\"complete\": true")) << json.out.substr(0, 600);
  rt::RunResult dump = rt::Run({rt::TracerPath(), "dump", trace});
  for (const std::string& line : dump.ErrLines()) EXPECT_FALSE(absl::StrContains(line, "incomplete")) << line;
}

}  // namespace
}  // namespace gpuos
