// Command lines of `gpuos-trace compare` and `gpuos-trace sweep`
// (cli/scenario_options.h): the cross product and substitution of --set,
// and every bad specification refused with one line before anything runs.
#include "cli/scenario_options.h"

#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/sweep_command.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

absl::StatusOr<ParsedCommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpuos-trace");
  return ParseCommandLine(args, "20261125-120000");
}

TEST(SweepOptions, CrossProductSubstitutesEveryArgument) {
  auto p = Parse({"sweep", "--set", "workers=0,2", "--set=pre=100,200", "--buffer-size", "32M", "--cuda-records",
                  "{rec}", "--set", "rec=kernel,kernel,memcpy", "--", "trainer", "--workers", "{workers}",
                  "--preprocess-us={pre}", "{'a': 1}", "{workers}{pre}"});
  ASSERT_FALSE(p.ok());  // "kernel" twice in --set rec
  EXPECT_NE(std::string(p.status().message()).find("listed twice"), std::string::npos) << p.status();

  p = Parse({"sweep", "--set", "workers=0,2", "--set=pre=100,200", "--buffer-size", "32M", "--", "trainer",
             "--workers", "{workers}", "--preprocess-us={pre}", "{'a': 1}", "{workers}{pre}"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kind, ParsedCommandLine::Kind::kSweep);
  const SweepCommand& s = p->sweep;
  EXPECT_EQ(s.output_dir, "sweep-20261125-120000");
  EXPECT_DOUBLE_EQ(s.knee_threshold, 0.05);
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.runs[0].name, "workers=0,pre=100");
  EXPECT_EQ(s.runs[1].name, "workers=0,pre=200");
  EXPECT_EQ(s.runs[3].name, "workers=2,pre=200");
  EXPECT_EQ(s.runs[3].command,
            (std::vector<std::string>{"trainer", "--workers", "2", "--preprocess-us=200", "{'a': 1}", "2200"}));
  EXPECT_EQ(s.runs[3].record_args, (std::vector<std::string>{"--buffer-size", "32M"}));
}

TEST(SweepOptions, OwnOptions) {
  auto p = Parse({"sweep", "-o", "out", "--knee-threshold", "10%", "--format", "json", "--html", "s.html",
                  "--batch-size", "64", "--warmup-steps", "2", "--set", "w=1", "--", "x", "{w}"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sweep.output_dir, "out");
  EXPECT_DOUBLE_EQ(p->sweep.knee_threshold, 0.10);
  EXPECT_TRUE(p->sweep.json);
  EXPECT_EQ(p->sweep.html_path, "s.html");
  EXPECT_EQ(*p->sweep.batch_size, 64u);
  EXPECT_EQ(p->sweep.steps.warmup_steps, 2u);
  EXPECT_TRUE(p->sweep.record_args.empty());
}

TEST(SweepOptions, BadSpecificationsAreOneLineErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"sweep", "--", "x"}, "at least one --set"},
      {{"sweep", "--set", "w=1,2", "--", "x", "{v}"}, "{v} in '{v}' is not a --set name (known: w)"},
      {{"sweep", "--set", "w=1,2", "--", "x"}, "--set w is used nowhere"},
      {{"sweep", "--set", "w=1,2", "x", "{w}"}, "sweep needs a command after --"},
      {{"sweep", "--set", "w", "--", "x"}, "expected NAME=V1,V2"},
      {{"sweep", "--set", "w=1,,2", "--", "x", "{w}"}, "an empty value"},
      {{"sweep", "--set", "9w=1", "--", "x", "{9w}"}, "is not a name"},
      {{"sweep", "--set", "w=1", "--set", "w=2", "--", "x", "{w}"}, "given twice"},
      {{"sweep", "--set", "w=1", "--knee-threshold", "0", "--", "x", "{w}"}, "between 0 and 100"},
      {{"sweep", "--set", "w=1", "--bogus", "--", "x", "{w}"}, "unknown option --bogus"},
      {{"sweep", "--set", "w=1", "--pid", "4", "--", "x", "{w}"}, "not both"},
      {{"sweep", "--set", "w=1", "--buffer-size", "{w}", "--", "x"}, "--buffer-size"},
      {{"compare"}, "compare needs trace files"},
      {{"compare", "a.gpuos", "b.gpuos", "--names", "x"}, "--names gives 1 names for 2 trace files"},
      {{"compare", "a.gpuos", "b.gpuos", "c.gpuos", "--batch-size", "1,2"}, "gives 2 sizes for 3"},
      {{"compare", "a.gpuos", "--format", "xml"}, "expected text or json"},
      {{"compare", "a.gpuos", "--frobnicate"}, "unknown compare option"},
  };
  for (const auto& [args, expected] : cases) {
    auto p = Parse(args);
    ASSERT_FALSE(p.ok()) << args[1] << " " << (args.size() > 2 ? args[2] : "");
    const std::string message(p.status().message());
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CompareOptions, NamesDefaultToFileNames) {
  auto p = Parse({"compare", "runs/eager.gpuos", "compiled.gpuos", "--batch-size", "128", "--knee-threshold=2.5"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kind, ParsedCommandLine::Kind::kCompare);
  EXPECT_EQ(p->compare.names, (std::vector<std::string>{"eager", "compiled"}));
  EXPECT_EQ(p->compare.batch_sizes, (std::vector<uint64_t>{128}));
  EXPECT_DOUBLE_EQ(*p->compare.knee_threshold, 0.025);
  EXPECT_FALSE(p->compare.json);
}

TEST(SweepOptions, RunFileNamesAreSafe) {
  EXPECT_EQ(SweepRunFileName(0, "workers=2,pre=100", ".gpuos"), "01-workers=2,pre=100.gpuos");
  EXPECT_EQ(SweepRunFileName(11, "model=../x y", ".log"), "12-model=.._x_y.log");
}

}  // namespace
}  // namespace gpuos
