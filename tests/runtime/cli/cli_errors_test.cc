// What the real gpuos-trace binary does when it cannot record: without
// privileges, with a BTF file that is not there, with bad options.  Each
// gets one line that says what to do, a documented exit code, and no
// half-made trace file.  The privilege test drops to user 65534 when run
// as root and runs as the current user otherwise.
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(CliErrors, WithoutPrivilegesSaysWhichCapabilitiesAndSuggestsSudo) {
  rt::TempDir dir;
  dir.MakeWorldWritable();  // so that a missing file is the tracer's choice
  const std::string trace = dir.File("unprivileged.gpuos");
  rt::RunOptions options;
  if (rt::IsRoot()) {
    options.uid = 65534;
    options.gid = 65534;
  }
  rt::RunResult r = rt::Run({rt::TracerPath(), "-o", trace, "--", "/bin/true"}, options);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  const std::vector<std::string> lines = r.ErrorLines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(lines[0], "CAP_BPF")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "CAP_PERFMON")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "sudo")) << lines[0];
  EXPECT_FALSE(Exists(trace)) << "no trace file may be left behind";
  EXPECT_EQ(r.out, "");
}

TEST(CliErrors, MissingBtfFileIsNamed) {
  GPUOS_REQUIRE_ROOT();  // privileges are checked first
  rt::TempDir dir;
  const std::string trace = dir.File("btf.gpuos");
  rt::RunResult r =
      rt::Run({rt::TracerPath(), "--btf", "/nonexistent/vmlinux", "-o", trace, "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  const std::vector<std::string> lines = r.ErrorLines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(lines[0], "/nonexistent/vmlinux")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "BTF")) << lines[0];
  EXPECT_FALSE(Exists(trace));
}

TEST(CliErrors, BadOptionsExit2WithOneLine) {
  rt::TempDir dir;
  const std::string trace = dir.File("never.gpuos");
  struct Case {
    std::vector<std::string> args;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {{"--bogus", "-o", trace, "--", "/bin/true"}, "--bogus"},
      {{"-o", trace, "--"}, "command"},
      {{"-o"}, "-o"},
      {{"--buffer-size", "3", "-o", trace, "--", "/bin/true"}, "--buffer-size"},
      {{"--fault-window", "soon", "-o", trace, "--", "/bin/true"}, "soon"},
      {{"report"}, "report"},
      {{"report", "a.gpuos", "b.gpuos"}, "b.gpuos"},
      {{"report", "a.gpuos", "--format", "xml"}, "xml"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {rt::TracerPath()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(absl::StrJoin(c.args, " "));
    rt::RunResult r = rt::Run(argv);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    const std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_TRUE(absl::StartsWith(lines[0], "gpuos-trace: ")) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], c.mentions)) << lines[0];
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(Exists(trace));
  }
}

}  // namespace
}  // namespace gpuos
