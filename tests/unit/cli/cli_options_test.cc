// gpuos-trace's command-line rules (cli/options.h), record and attach side:
// what each option sets, and the one-line error for each misuse.
#include "cli/options.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

absl::StatusOr<ParsedCommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpuos-trace");
  return ParseCommandLine(args, "20261122-000000");
}

void ExpectError(std::vector<std::string> args, const std::string& message) {
  auto parsed = Parse(args);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << args.back();
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), message)) << parsed.status();
}

TEST(CliOptions, LaunchTakesTheCommandAfterTheOptions) {
  auto parsed = Parse({"-o", "run.gpuos", "--buffer-size", "64M", "--", "python3", "-c", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, ParsedCommandLine::Kind::kRecord);
  EXPECT_EQ(parsed->record.output_path, "run.gpuos");
  EXPECT_EQ(parsed->record.ring_buffer_bytes, 64ull << 20);
  EXPECT_EQ(parsed->record.command, (std::vector<std::string>{"python3", "-c", "1"}));
  EXPECT_FALSE(parsed->record.attaching());
  auto defaulted = Parse({"ls"});
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->record.output_path, "gpuos-trace-20261122-000000.gpuos");
}

TEST(CliOptions, AttachOptions) {
  auto parsed = Parse({"--pid", "42", "--pid=43", "--pid", "42", "--duration", "30s", "--no-inject"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const RecordOptions& r = parsed->record;
  EXPECT_TRUE(r.attaching());
  EXPECT_EQ(r.attach_pids, (std::vector<int>{42, 43}));  // a repeated pid counts once
  EXPECT_EQ(r.duration_ns, 30'000'000'000ull);
  EXPECT_FALSE(r.inject);
  EXPECT_TRUE(r.command.empty());
  auto gpu = Parse({"--gpu-procs", "--duration", "2m"});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->record.gpu_procs);
  EXPECT_TRUE(gpu->record.attaching());
  EXPECT_EQ(gpu->record.duration_ns, 120'000'000'000ull);
}

TEST(CliOptions, PrepareTakesACommand) {
  auto parsed = Parse({"--prepare", "--", "python3", "train.py"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->record.prepare);
  EXPECT_EQ(parsed->record.command, (std::vector<std::string>{"python3", "train.py"}));
}

TEST(CliOptions, CudaRecordsChoosesTheKinds) {
  auto parsed = Parse({"--cuda-records", "kernel,memcpy,memset", "--", "python3", "train.py"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->record.cuda_records, "kernel,memcpy,memset");
  auto inline_value = Parse({"--cuda-records=memcpy,sync", "./trainer"});
  ASSERT_TRUE(inline_value.ok()) << inline_value.status();
  EXPECT_EQ(inline_value->record.cuda_records, "memcpy,sync");
  auto prepared = Parse({"--prepare", "--cuda-records", "kernel", "--", "./trainer"});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->record.cuda_records, "kernel");
  auto defaulted = Parse({"./trainer"});
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->record.cuda_records, "");  // all kinds

  ExpectError({"--cuda-records", "kernel,foo", "--", "ls"}, "unknown kind 'foo'");
  ExpectError({"--cuda-records", "", "--", "ls"}, "unknown kind ''");
  ExpectError({"--cuda-records", "kernel,,memcpy", "--", "ls"}, "unknown kind ''");
  ExpectError({"--cuda-records", "kernel,kernel", "--", "ls"}, "'kernel' is listed twice");
  ExpectError({"--cuda-records", "runtime,driver", "--", "ls"}, "needs kernel or memcpy");
  ExpectError({"--no-cuda", "--cuda-records", "kernel", "--", "ls"}, "not go with --no-cuda");
  ExpectError({"--pid", "42", "--cuda-records", "kernel"}, "not with --pid/--gpu-procs");
  ExpectError({"--cuda-records"}, "needs a value");
}

TEST(CliOptions, FlightRecorderTakesASizeOrADuration) {
  auto sized = Parse({"--flight-recorder", "256M", "--flight-trigger", "slow-step=3x", "--", "./trainer"});
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_EQ(sized->record.flight_bytes, 256ull << 20);
  EXPECT_EQ(sized->record.flight_span_ns, 0u);
  EXPECT_DOUBLE_EQ(sized->record.flight_slow_step_factor, 3.0);
  EXPECT_TRUE(sized->record.flight_recorder());
  // "10m" is minutes; "10M" MiB.
  auto timed = Parse({"--flight-recorder=10m", "--pid", "42"});
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_EQ(timed->record.flight_span_ns, 600'000'000'000ull);
  EXPECT_EQ(timed->record.flight_bytes, 0u);
  auto mib = Parse({"--flight-recorder=10M", "./trainer"});
  ASSERT_TRUE(mib.ok()) << mib.status();
  EXPECT_EQ(mib->record.flight_bytes, 10ull << 20);
  ExpectError({"--flight-recorder", "12K", "./t"}, "at least 64K");
  ExpectError({"--flight-recorder", "500ms", "./t"}, "at least 1s");
  ExpectError({"--flight-recorder", "lots", "./t"}, "expected a size");
  ExpectError({"--flight-trigger", "slow-step=3x", "./t"}, "goes with --flight-recorder");
  ExpectError({"--flight-recorder", "1G", "--flight-trigger", "slow-step=1x", "./t"}, "above 1");
  ExpectError({"--flight-recorder", "1G", "--flight-trigger", "fast-step", "./t"}, "slow-step=Nx");
  ExpectError({"--flight-recorder", "1G", "--max-size", "1G", "./t"}, "do not go together");
}

TEST(CliOptions, CtlDump) {
  auto parsed = Parse({"ctl", "--pid", "1234", "dump"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, ParsedCommandLine::Kind::kCtl);
  EXPECT_EQ(parsed->ctl.pid, 1234);
  EXPECT_EQ(parsed->ctl.action, "dump");
  ExpectError({"ctl", "dump"}, "needs --pid");
  ExpectError({"ctl", "--pid", "1", "explode"}, "unknown ctl action");
  ExpectError({"ctl", "--pid", "1"}, "needs an action");
}

TEST(CliOptions, MisusesGetOneClearLine) {
  ExpectError({}, "nothing to do");
  ExpectError({"-o", "x.gpuos"}, "no command to trace");
  ExpectError({"--pid"}, "option --pid needs a value");
  ExpectError({"--pid", "abc"}, "--pid abc: expected a process id");
  ExpectError({"--pid", "0"}, "--pid 0: expected a process id");
  ExpectError({"--pid", "-5"}, "--pid -5: expected a process id");
  ExpectError({"--pid", "42", "--", "ls"}, "not both");
  ExpectError({"--duration", "5s", "--", "ls"}, "--duration goes with --pid");
  ExpectError({"--no-inject", "--", "ls"}, "--no-inject goes with --pid");
  ExpectError({"--pid", "42", "--duration", "5"}, "is not a duration");
  ExpectError({"--pid", "42", "--duration", "0s"}, "--duration must be longer than 0");
  ExpectError({"--prepare"}, "--prepare needs a command");
  ExpectError({"--prepare", "--pid", "42"}, "--prepare starts a command");
  ExpectError({"--buffer-size", "3000", "--", "ls"}, "power of two");
  ExpectError({"--frobnicate", "--", "ls"}, "unknown option --frobnicate");
}

}  // namespace
}  // namespace gpuos
