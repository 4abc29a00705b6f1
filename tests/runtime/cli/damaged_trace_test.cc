// `gpuos-trace report` on damaged traces made by the real recorder: cut off
// by SIGKILL of the tracer mid-run, truncated at every kind of place, and
// with single bytes corrupted.  What was readable is reported, the damage
// is named in one line with its byte offset (exit 3), a file without a
// readable header is refused in one line (exit 1), and nothing crashes.
// Needs root (eBPF) to record the traces.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/os_summary.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

rt::RunResult Report(const std::string& path, bool json = false) {
  std::vector<std::string> argv = {rt::TracerPath(), "report", path};
  if (json) {
    argv.push_back("--format");
    argv.push_back("json");
  }
  return rt::Run(argv);
}

// The number after "byte offset " in `text`, or -1.
int64_t NamedOffset(const std::string& text) {
  const size_t at = text.find("byte offset ");
  if (at == std::string::npos) return -1;
  size_t end = at + 12;
  while (end < text.size() && isdigit(static_cast<unsigned char>(text[end]))) ++end;
  int64_t offset = -1;
  if (!absl::SimpleAtoi(text.substr(at + 12, end - at - 12), &offset)) return -1;
  return offset;
}

// Events in the frames before `offset`, read from an intact copy.
size_t EventsBefore(const std::string& intact_path, uint64_t offset) {
  const std::string bytes = rt::ReadFile(intact_path).value_or("");
  rt::TempDir dir;
  const std::string cut = dir.File("cut.gpuos");
  rt::WriteFile(cut, bytes.substr(0, offset));
  auto trace = rt::ReadTrace(cut);
  return trace.ok() ? trace->events.size() : 0;
}

// One complete recording shared by the tests: a few hundred events in
// several frames.
class DamagedTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!rt::IsRoot()) return;
    dir_ = new rt::TempDir();
    intact_ = dir_->File("intact.gpuos");
    // 1.5 s of sleeps spread the events over several batches: the recorder
    // writes one at every snapshot, about every second, and one at the end.
    rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "-o", intact_, "--",
                               rt::WorkloadPath("ground_truth"), "--threads", "2", "--workers",
                               "1", "--sleeps", "15", "--sleep-us", "100000", "--report",
                               dir_->File("report.txt")});
    recorded_ok_ = r.exit_code == 0;
    record_log_ = r.Describe();
    bytes_ = rt::ReadFile(intact_).value_or("");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    GPUOS_REQUIRE_ROOT();
    ASSERT_TRUE(recorded_ok_) << record_log_;
    frames_ = rt::FrameOffsets(bytes_);
    // Header, at least two batches, trailer.
    ASSERT_GE(frames_.size(), 4u) << "the recording should span several frames";
    ASSERT_EQ(FrameEnd(frames_.size() - 1), bytes_.size()) << "frames cover the whole file";
  }

  uint64_t FrameEnd(size_t i) const {
    return i + 1 < frames_.size() ? frames_[i + 1] : bytes_.size();
  }
  // The frame that holds byte `pos`.
  size_t FrameAt(uint64_t pos) const {
    size_t i = 0;
    while (i + 1 < frames_.size() && frames_[i + 1] <= pos) ++i;
    return i;
  }
  std::string Write(const std::string& name, const std::string& data) const {
    const std::string path = dir_->File(name);
    rt::WriteFile(path, data);
    return path;
  }

  static rt::TempDir* dir_;
  static std::string intact_;
  static std::string bytes_;
  static bool recorded_ok_;
  static std::string record_log_;
  std::vector<uint64_t> frames_;
};

rt::TempDir* DamagedTrace::dir_ = nullptr;
std::string DamagedTrace::intact_;
std::string DamagedTrace::bytes_;
bool DamagedTrace::recorded_ok_ = false;
std::string DamagedTrace::record_log_;

TEST_F(DamagedTrace, TheIntactTraceReportsCleanly) {
  rt::RunResult r = Report(intact_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(r.ErrorLines().empty()) << r.err;
}

TEST_F(DamagedTrace, TruncatedInsideAFrameReportsWhatCameBeforeIt) {
  const size_t last = frames_.size() - 1;
  struct Cut {
    const char* what;
    uint64_t size;
  };
  for (const Cut& cut : {Cut{"inside the last frame's length", frames_[last] + 2},
                         Cut{"inside the last frame's payload", frames_[last] + 8 + 1},
                         Cut{"one byte short", bytes_.size() - 1},
                         Cut{"inside a batch in the middle", frames_[2] + 9}}) {
    SCOPED_TRACE(cut.what);
    const std::string path = Write("truncated.gpuos", bytes_.substr(0, cut.size));
    const uint64_t damaged_frame = frames_[FrameAt(cut.size)];
    rt::RunResult r = Report(path);
    EXPECT_EQ(r.exit_code, 3) << r.Describe();
    const std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(NamedOffset(lines[0]), static_cast<int64_t>(damaged_frame)) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], "truncated")) << lines[0];
    EXPECT_TRUE(absl::StrContains(r.out, "gpuos-trace OS report")) << "the readable part is reported";

    auto summary = SummarizeTraceFile(path);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->events, EventsBefore(intact_, damaged_frame));
    EXPECT_NE(summary->read_error, "");

    rt::RunResult json = Report(path, /*json=*/true);
    EXPECT_EQ(json.exit_code, 3) << json.Describe();
    EXPECT_TRUE(absl::StrContains(json.out, "\"read_error\": \"") ||
                absl::StrContains(json.out, "\"read_error\":\""))
        << json.out.substr(0, 2000);
  }
}

TEST_F(DamagedTrace, TruncatedAtAFrameBoundaryIsCleanButHasNoTrailer) {
  const std::string path = Write("boundary.gpuos", bytes_.substr(0, frames_.back()));
  rt::RunResult r = Report(path);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "no trailer")) << r.out.substr(0, 2000);
  auto summary = SummarizeTraceFile(path);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->has_trailer);
  EXPECT_EQ(summary->read_error, "");
}

TEST_F(DamagedTrace, NoHeaderIsRefusedInOneLine) {
  for (uint64_t size : {uint64_t{0}, uint64_t{5}, uint64_t{12}, uint64_t{12 + 3}, frames_[1] - 1}) {
    SCOPED_TRACE(size);
    rt::RunResult r = Report(Write("noheader.gpuos", bytes_.substr(0, size)));
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_EQ(r.ErrorLines().size(), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  rt::RunResult r = Report(dir_->File("does-not-exist.gpuos"));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_EQ(r.ErrorLines().size(), 1u) << r.err;
}

// Every byte of a .gpuos file is checked: the magic, the frame lengths and
// CRCs cover it all.  So one corrupted byte anywhere is always found, and
// named by the offset of the frame that holds it.
TEST_F(DamagedTrace, EveryCorruptedByteIsFoundAndNamed) {
  std::vector<uint64_t> positions = {0, 3, 8, 11};  // magic and format version
  for (size_t i = 0; i < frames_.size(); ++i) {
    // Length, CRC, first, middle and last payload byte of every frame.
    for (uint64_t pos : {frames_[i], frames_[i] + 3, frames_[i] + 5, frames_[i] + 8,
                         (frames_[i] + 8 + FrameEnd(i)) / 2, FrameEnd(i) - 1}) {
      positions.push_back(pos);
    }
  }
  for (uint64_t pos : positions) {
    SCOPED_TRACE(absl::StrCat("byte ", pos, " of ", bytes_.size()));
    std::string corrupt = bytes_;
    corrupt[pos] = static_cast<char>(corrupt[pos] ^ 0x5a);
    rt::RunResult r = Report(Write("corrupt.gpuos", corrupt));
    const std::vector<std::string> lines = r.ErrorLines();
    ASSERT_EQ(lines.size(), 1u) << r.Describe();
    const size_t frame = FrameAt(pos);
    if (pos < frames_[0] || frame == 0) {
      EXPECT_EQ(r.exit_code, 1) << r.Describe();  // no valid header: nothing to report
    } else {
      EXPECT_EQ(r.exit_code, 3) << r.Describe();
      EXPECT_EQ(NamedOffset(lines[0]), static_cast<int64_t>(frames_[frame])) << lines[0];
    }
  }
}

// Truncation at many places through the file, as a crash or a full disk
// would leave it: never a crash, and always 0, 1 or 3.
TEST_F(DamagedTrace, TruncationAnywhereNeverCrashes) {
  const uint64_t step = std::max<uint64_t>(1, bytes_.size() / 60);
  for (uint64_t size = 1; size < bytes_.size(); size += step) {
    SCOPED_TRACE(absl::StrCat("cut at ", size, " of ", bytes_.size()));
    rt::RunResult r = Report(Write("cut.gpuos", bytes_.substr(0, size)));
    const size_t frame = FrameAt(size);
    const bool on_boundary = frames_[frame] == size;
    if (size < FrameEnd(0)) {
      EXPECT_EQ(r.exit_code, 1) << r.Describe();
    } else if (on_boundary) {
      EXPECT_EQ(r.exit_code, 0) << r.Describe();
    } else {
      EXPECT_EQ(r.exit_code, 3) << r.Describe();
      EXPECT_EQ(NamedOffset(r.err), static_cast<int64_t>(frames_[frame])) << r.err;
    }
    EXPECT_LE(r.ErrorLines().size(), 1u) << r.err;
  }
}

TEST(CutOffTrace, SigkillOfTheTracerLeavesAReadableTrace) {
  GPUOS_REQUIRE_ROOT();
  rt::TempDir dir;
  const std::string trace = dir.File("cut.gpuos");
  rt::Child tracer = rt::Child::Start(
      {rt::TracerPath(), "-q", "-o", trace, "--", rt::WorkloadPath("ground_truth"), "--threads",
       "2", "--workers", "1", "--sleeps", "100", "--sleep-us", "20000", "--report",
       dir.File("report.txt")});
  // Wait until the recorder has flushed a batch or two after the header.
  ASSERT_TRUE(rt::WaitUntil(
      [&] { return rt::FrameOffsets(rt::ReadFile(trace).value_or("")).size() >= 3; }, 30))
      << "nothing was flushed";
  kill(tracer.pid(), SIGKILL);
  tracer.Wait(10);
  // The command, orphaned, would carry on; it is of no interest here.
  kill(-tracer.pid(), SIGKILL);

  // Whether the kill fell between two writes or inside one decides between
  // a clean end and exit 3 naming where the complete frames end.
  const std::string bytes = rt::ReadFile(trace).value_or("");
  const uint64_t complete = rt::CompleteFramesEnd(bytes);
  rt::RunResult r = Report(trace);
  EXPECT_TRUE(absl::StrContains(r.out, "gpuos-trace OS report")) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "no trailer")) << r.out.substr(0, 2000);
  const std::vector<std::string> lines = r.ErrorLines();
  if (complete == bytes.size()) {
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(lines.empty()) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 3) << r.Describe();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(NamedOffset(lines[0]), static_cast<int64_t>(complete)) << lines[0];
  }

  auto summary = SummarizeTraceFile(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->has_trailer);
  EXPECT_GT(summary->events, 0u);
  bool root_seen = false;
  for (const ProcessSummary& p : summary->processes) root_seen |= p.is_root;
  EXPECT_TRUE(root_seen);
}

}  // namespace
}  // namespace gpuos
