// The block I/O source (bpf/block_io.bpf.c, record/sources/block_io_source.cc)
// with the real gpuos-trace and real eBPF: tests/workloads/direct_io writes
// and reads back a known number of O_DIRECT blocks of a file on the build
// tree's file system (a real block device; tmpfs has none), one
// synchronous request at a time, in a thread of its own, and reports the
// kernel's own I/O accounting of that thread.  The trace's BlockIo events of
// that thread must be exactly those requests: the count and size of each,
// their bytes against /proc/PID/task/TID/io, writes and reads of the same
// sectors, the device the file lives on, each request inside the
// recording, and (where tracefs is mounted) the device, rwbs and sector of
// each as the kernel's own block_io_start tracepoint prints them; then the
// same requests in the report's per-thread block_io and as slices on the
// process's "disk <name>" track of the export.  Needs root (eBPF).
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime_support.h"

namespace gpuos {
namespace {

// A fresh directory in the build tree, which lives on a block device
// (/tmp may be a tmpfs), removed at the end.
class BuildTreeDir {
 public:
  BuildTreeDir() {
    std::string templ =
        (std::filesystem::path(GPUOS_TRACE_BIN).parent_path() / "block_io_test.XXXXXX").string();
    if (mkdtemp(templ.data())) path_ = templ;
  }
  ~BuildTreeDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole disk that holds `path` ("vda" for a file on vda1 or vda), as
// sysfs names it; empty when it is no block device (tmpfs, overlay...).
std::string DiskOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  const std::string dev = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev));
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(dev, ec);
  if (ec) return "";
  if (std::filesystem::exists(real / "partition")) real = real.parent_path();
  return real.filename().string();
}

// The kernel's own block_io_start lines for command `comm`, in a tracefs
// instance of the test's own, while it lives.  block_io_start runs in the
// submitting thread; block_rq_issue runs where the request is dispatched,
// at times a kworker (a plugged request flushed later), whose lines a
// filter on the submitter's comm would miss (seen once in CI: one write).
class KernelBlockTrace {
 public:
  explicit KernelBlockTrace(const std::string& comm) {
    const std::string dir =
        "/sys/kernel/tracing/instances/gpuos_block_io_test_" + std::to_string(getpid());
    std::error_code ec;
    if (!std::filesystem::create_directory(dir, ec)) return;
    dir_ = dir;
    const std::string event = dir_ + "/events/block/block_io_start/";
    on_ = rt::WriteFile(event + "filter", "comm == \"" + comm + "\"") &&
          rt::WriteFile(event + "enable", "1");
  }
  ~KernelBlockTrace() {
    if (dir_.empty()) return;
    rt::WriteFile(dir_ + "/events/block/block_io_start/enable", "0");
    rmdir(dir_.c_str());
  }
  bool on() const { return on_; }
  // "MAJ,MIN RWBS SECTOR" per request of thread tid, as the kernel prints
  // them ("direct_io-TID [cpu] ... block_io_start: 254,0 WS 65536 () 354775808 + 128 ...").
  std::multiset<std::string> Requests(uint32_t tid) const {
    std::multiset<std::string> out;
    const std::string text = rt::ReadFile(dir_ + "/trace").value_or("");
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      if (!absl::StrContains(line, "-" + std::to_string(tid) + " ")) continue;
      constexpr absl::string_view kEvent = "block_io_start: ";
      const size_t at = line.find(kEvent);
      if (at == absl::string_view::npos) continue;
      std::vector<std::string> f =
          absl::StrSplit(line.substr(at + kEvent.size()), ' ', absl::SkipEmpty());
      if (f.size() >= 5) out.insert(f[0] + " " + f[1] + " " + f[4]);
    }
    return out;
  }

 private:
  std::string dir_;
  bool on_ = false;
};

// direct_io's report line as key -> value.
std::map<std::string, int64_t> ParseReport(const std::string& out) {
  std::map<std::string, int64_t> fields;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "tid=")) continue;
    for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (absl::SimpleAtoi(p.second, &v)) fields[p.first] = v;
    }
  }
  return fields;
}

// The report's per-thread block_io of `tid` holds exactly the recorded
// requests: the analysis and the JSON, end to end.
void ExpectReportCounts(const std::string& trace, uint32_t tid, size_t requests, int64_t bytes,
                        uint64_t total_ns) {
  absl::StatusOr<google::protobuf::Struct> report = rt::JsonReport(trace);
  ASSERT_TRUE(report.ok()) << report.status();
  const google::protobuf::Value* found = nullptr;
  for (const google::protobuf::Value& p : report->fields().at("processes").list_value().values()) {
    for (const google::protobuf::Value& t : p.struct_value().fields().at("threads").list_value().values()) {
      if (static_cast<uint32_t>(t.struct_value().fields().at("tid").number_value()) == tid) found = &t;
    }
  }
  ASSERT_NE(found, nullptr) << "thread " << tid << " not in the report";
  const rt::JsonFields& io = found->struct_value().fields().at("block_io").struct_value().fields();
  EXPECT_EQ(io.at("requests").number_value(), static_cast<double>(requests));
  EXPECT_EQ(io.at("bytes").number_value(), static_cast<double>(bytes));
  EXPECT_EQ(io.at("total_ns").number_value(), static_cast<double>(total_ns));
}

// The Chrome JSON export (written with the Perfetto file) draws each of the
// thread's requests as one slice named after its operation on a "disk
// <name>" track of its process: kRequests writes and kRequests reads.
void ExpectExportedSlices(const std::string& trace, const rt::TempDir& out, uint32_t tid,
                          const std::string& disk, int requests) {
  const std::string pftrace = out.File("run.pftrace");
  rt::RunResult r = rt::Run({rt::TracerPath(), "export", trace, "-o", pftrace, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::optional<std::string> json = rt::ReadFile(out.File("run.json"));
  ASSERT_TRUE(json.has_value());
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &doc).ok());
  std::set<double> disk_tracks;
  std::map<std::string, int> slices;
  const auto& events = doc.fields().at("traceEvents").list_value().values();
  for (const google::protobuf::Value& v : events) {
    const rt::JsonFields& e = v.struct_value().fields();
    if (e.at("ph").string_value() == "M" && e.at("name").string_value() == "thread_name" &&
        e.at("args").struct_value().fields().at("name").string_value() == "disk " + disk) {
      disk_tracks.insert(e.at("tid").number_value());
    }
  }
  for (const google::protobuf::Value& v : events) {
    const rt::JsonFields& e = v.struct_value().fields();
    if (e.at("ph").string_value() != "B" || !disk_tracks.count(e.at("tid").number_value())) continue;
    const rt::JsonFields& args = e.at("args").struct_value().fields();
    if (args.count("issuing_tid") && args.at("issuing_tid").number_value() == tid) {
      ++slices[e.at("name").string_value()];
    }
  }
  EXPECT_EQ(slices["disk write"], requests);
  EXPECT_EQ(slices["disk read"], requests);
}

TEST(RecordingBlockIo, DirectWritesAndReadsAreTheThreadsRequestsAsTheKernelCountsThem) {
  GPUOS_REQUIRE_ROOT();
  BuildTreeDir dir;
  ASSERT_FALSE(dir.path().empty()) << "cannot make a directory in the build tree";
  const std::string disk = DiskOf(dir.path());
  if (disk.empty()) GTEST_SKIP() << dir.path() << " is on no block device";
  rt::TempDir out;
  const std::string trace = out.File("run.gpuos");
  constexpr int kRequests = 12;
  constexpr int kBytes = 64 * 1024;
  KernelBlockTrace kernel_trace("direct_io");
  const double start_s = rt::MonotonicSeconds();
  rt::RunResult r = rt::Run({rt::TracerPath(), "-q", "-o", trace, "--", rt::WorkloadPath("direct_io"),
                             "--dir", dir.path(), "--requests", std::to_string(kRequests), "--bytes",
                             std::to_string(kBytes)});
  const double end_s = rt::MonotonicSeconds();
  if (r.exit_code == 77) GTEST_SKIP() << "the file system refuses O_DIRECT: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(r.ErrorLines().empty()) << r.Describe();
  std::map<std::string, int64_t> report = ParseReport(r.out);
  ASSERT_TRUE(report.count("tid")) << r.Describe();
  const uint32_t tid = static_cast<uint32_t>(report["tid"]);
  // The kernel's own accounting agrees with what the workload meant to do.
  ASSERT_EQ(report["write_bytes"], int64_t{kRequests} * kBytes) << r.out;
  ASSERT_EQ(report["read_bytes"], int64_t{kRequests} * kBytes) << r.out;

  absl::StatusOr<rt::TraceContents> contents = rt::ReadTrace(trace);
  ASSERT_TRUE(contents.ok()) << contents.status();
  std::vector<v1::Event> requests;
  uint32_t pid = 0;
  for (const v1::Event& e : contents->events) {
    if (e.has_process_start() && e.process_start().is_root()) pid = e.pid();
    if (e.has_block_io() && e.tid() == tid) requests.push_back(e);
  }
  ASSERT_EQ(requests.size(), 2u * kRequests) << "BlockIo events of thread " << tid;
  int64_t written = 0, read = 0;
  std::multiset<uint64_t> write_sectors, read_sectors;
  std::multiset<std::string> as_the_kernel_prints;
  for (const v1::Event& e : requests) {
    const v1::BlockIo& b = e.block_io();
    SCOPED_TRACE(b.DebugString());
    EXPECT_EQ(e.pid(), pid);
    EXPECT_EQ(b.bytes(), static_cast<uint32_t>(kBytes));
    EXPECT_EQ(b.error(), 0);
    EXPECT_EQ(b.dev_name(), disk);
    EXPECT_NE(b.dev(), 0u);
    EXPECT_GT(b.duration_ns(), 0u);
    // Submitted before it was issued, inside the workload's run.
    EXPECT_GT(e.ts_ns() - b.queued_ns(), static_cast<uint64_t>(start_s * 1e9));
    EXPECT_LT(e.ts_ns() + b.duration_ns(), static_cast<uint64_t>(end_s * 1e9));
    as_the_kernel_prints.insert(std::to_string(b.dev() >> 20) + "," +
                                std::to_string(b.dev() & 0xfffff) + " " + b.rwbs() + " " +
                                std::to_string(b.sector()));
    if (absl::StrContains(b.rwbs(), "W")) {
      written += b.bytes();
      write_sectors.insert(b.sector());
    } else if (absl::StrContains(b.rwbs(), "R")) {
      read += b.bytes();
      read_sectors.insert(b.sector());
    } else {
      ADD_FAILURE() << "neither a read nor a write";
    }
  }
  EXPECT_EQ(written, report["write_bytes"]);
  EXPECT_EQ(read, report["read_bytes"]);
  // The reads fetched back the blocks the writes wrote.
  EXPECT_EQ(read_sectors, write_sectors);
  EXPECT_EQ(std::set<uint64_t>(write_sectors.begin(), write_sectors.end()).size(),
            static_cast<size_t>(kRequests));
  if (kernel_trace.on()) {
    EXPECT_EQ(as_the_kernel_prints, kernel_trace.Requests(tid));
  } else {
    std::cerr << "no tracefs instance: the kernel's own block_io_start lines not compared\n";
  }
  uint64_t total_ns = 0;
  for (const v1::Event& e : requests) total_ns += e.block_io().duration_ns();
  ExpectReportCounts(trace, tid, requests.size(), written + read, total_ns);
  ExpectExportedSlices(trace, out, tid, disk, kRequests);
}

}  // namespace
}  // namespace gpuos
