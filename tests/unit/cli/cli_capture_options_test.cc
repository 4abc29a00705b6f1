// --capture, --always-on and `ctl --pid PID capture N` on the command line
// (cli/options.h): what they set, and the one-line error for each misuse.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cli/options.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

absl::StatusOr<ParsedCommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpuos-trace");
  return ParseCommandLine(args, "20261125-000000");
}

void ExpectError(std::vector<std::string> args, const std::string& message) {
  auto parsed = Parse(args);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << args.front();
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), message)) << parsed.status();
  EXPECT_FALSE(absl::StrContains(parsed.status().message(), "\n")) << parsed.status();
}

TEST(CliCaptureOptions, CaptureAndAlwaysOnSetTheSpecForEveryRecordingMode) {
  auto launch = Parse({"--capture", "steps=100..119", "--", "python3", "train.py"});
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(launch->record.capture_spec, "steps=100..119");
  auto always = Parse({"--always-on", "python3", "train.py"});
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_EQ(always->record.capture_spec, "every=10s,steps=2");
  auto prepared = Parse({"--prepare", "--capture=on-demand", "--", "python3", "train.py"});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->record.capture_spec, "on-demand");
  auto attach = Parse({"--pid", "42", "--capture", "every=200,steps=10"});
  ASSERT_TRUE(attach.ok()) << attach.status();
  EXPECT_EQ(attach->record.capture_spec, "every=200,steps=10");
  auto none = Parse({"ls"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->record.capture_spec, "");
}

TEST(CliCaptureOptions, BadSpecsAndMisusesAreOneLineErrors) {
  ExpectError({"--capture", "steps=5..2", "ls"}, "--capture steps=5..2: the last step is before the first");
  ExpectError({"--capture", "every=20", "ls"}, "every=N needs steps=K");
  ExpectError({"--capture", "nvtx=", "ls"}, "nvtx= needs a range name");
  ExpectError({"--capture", "after=1m", "ls"}, "needs both after= and for=");
  ExpectError({"--capture"}, "needs a value");
  ExpectError({"--always-on", "--capture", "steps=1..2", "ls"}, "one of --capture and --always-on");
  ExpectError({"--always-on=yes", "ls"}, "takes no value");
  ExpectError({"--no-cuda", "--always-on", "ls"}, "do not go with --no-cuda");
}

TEST(CliCaptureOptions, CtlCaptureTakesANumberOfSteps) {
  auto parsed = Parse({"ctl", "--pid", "42", "capture", "20"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, ParsedCommandLine::Kind::kCtl);
  EXPECT_EQ(parsed->ctl.action, "capture");
  EXPECT_EQ(parsed->ctl.capture_steps, 20u);
  ExpectError({"ctl", "--pid", "42", "capture"}, "ctl capture needs a number of steps");
  ExpectError({"ctl", "--pid", "42", "capture", "0"}, "expected a number of steps above 0");
  ExpectError({"ctl", "--pid", "42", "capture", "x"}, "expected a number of steps above 0");
  ExpectError({"ctl", "--pid", "42", "dump", "3"}, "ctl takes one action");
  auto dump = Parse({"ctl", "--pid", "42", "dump"});
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->ctl.action, "dump");
}

}  // namespace
}  // namespace gpuos
