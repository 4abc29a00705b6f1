// The flight recorder's ring of segments (stream/flight_recorder.h) on real
// files: rotation, the size and duration bounds, and dumps that are complete
// traces holding exactly the last window's events, every thread named.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stream/flight_recorder.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

constexpr uint64_t kStartNs = 1'000'000'000'000;

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/flight_recorder_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<FlightRecorder> Open(uint64_t max_bytes, uint64_t max_span_ns) {
    FlightRecorder::Options options;
    options.output_path = dir_ + "/run.gpuos";
    options.max_bytes = max_bytes;
    options.max_span_ns = max_span_ns;
    auto flight = FlightRecorder::Create(options);
    EXPECT_TRUE(flight.ok()) << flight.status();
    v1::TraceHeader header;
    header.set_hostname("test-host");
    header.mutable_start_clock()->set_monotonic_ns(kStartNs);
    header.mutable_start_clock()->set_realtime_ns(5 * kStartNs);
    EXPECT_TRUE((*flight)->WriteHeader(header).ok());
    return std::move(*flight);
  }

  static v1::Event ProcessStart(uint64_t ts, uint32_t pid, const std::string& comm) {
    v1::Event e;
    e.set_ts_ns(ts);
    e.set_pid(pid);
    e.set_tid(pid);
    e.mutable_process_start()->set_comm(comm);
    e.mutable_process_start()->set_is_root(pid == 100);
    return e;
  }
  static v1::Event ThreadStart(uint64_t ts, uint32_t pid, uint32_t tid, const std::string& comm) {
    v1::Event e;
    e.set_ts_ns(ts);
    e.set_pid(pid);
    e.set_tid(tid);
    e.mutable_thread_start()->set_comm(comm);
    return e;
  }
  // A numbered off-CPU event: its syscall_nr field carries `seq` so a dump's
  // events can be matched to what was appended.
  static v1::Event Work(uint64_t ts, uint32_t pid, uint32_t tid, int32_t seq) {
    v1::Event e;
    e.set_ts_ns(ts);
    e.set_pid(pid);
    e.set_tid(tid);
    e.mutable_off_cpu()->set_duration_ns(1000);
    e.mutable_off_cpu()->set_syscall_nr(seq);
    return e;
  }

  struct Read {
    v1::TraceHeader header;
    std::vector<v1::Event> events;
    bool has_trailer = false;
    v1::TraceTrailer trailer;
  };
  static Read ReadTrace(const std::string& path) {
    Read out;
    auto reader = TraceReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return out;
    out.header = (*reader)->header();
    absl::Status s = ForEachEvent(
        **reader, [&](const v1::Event& e) { out.events.push_back(e); },
        [&](const v1::TraceTrailer& t) {
          out.has_trailer = true;
          out.trailer = t;
        });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  static size_t SegmentFiles(const std::string& dir) {
    size_t n = 0;
    if (DIR* d = opendir(dir.c_str())) {
      while (const dirent* e = readdir(d)) n += std::string(e->d_name).rfind("seg-", 0) == 0;
      closedir(d);
    }
    return n;
  }

  std::string dir_;
};

TEST_F(FlightRecorderTest, SizeBoundHoldsAndTheDumpIsExactlyTheLastWindow) {
  constexpr uint64_t kMax = 256 << 10;
  auto flight = Open(kMax, 0);
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs, 100, "job")).ok());
  ASSERT_TRUE(flight->Append(ThreadStart(kStartNs + 1, 100, 101, "worker")).ok());
  constexpr int kEvents = 100'000;  // about 2 MB: the ring turns over many times
  uint64_t max_ring = 0;
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_TRUE(flight->Append(Work(kStartNs + 1000 + i * 1000ull, 100, i % 2 ? 101 : 100, i)).ok());
    if (i % 997 == 0) {
      ASSERT_TRUE(flight->Flush().ok());
      max_ring = std::max(max_ring, flight->ring_bytes());
      ASSERT_LE(flight->segment_count(), 8u);
    }
  }
  EXPECT_LE(max_ring, kMax);
  EXPECT_GT(max_ring, kMax / 2) << "the ring should use most of its room";
  EXPECT_GT(flight->events_rotated_out(), 0u);
  EXPECT_EQ(flight->events_rotated_out() + flight->window_events(), kEvents + 2u);
  EXPECT_EQ(SegmentFiles(flight->ring_dir()), flight->segment_count());

  v1::TraceTrailer trailer;
  trailer.set_dropped_events(7);
  auto dump = flight->Dump(flight->DumpPath(1), trailer, "test");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->path, dir_ + "/run.dump-1.gpuos");
  Read r = ReadTrace(dump->path);
  ASSERT_TRUE(r.has_trailer);
  EXPECT_EQ(r.trailer.events_written(), r.events.size());
  EXPECT_EQ(r.trailer.dropped_events(), 7u);
  ASSERT_TRUE(r.header.has_flight_window());
  EXPECT_EQ(r.header.hostname(), "test-host");
  EXPECT_EQ(r.header.flight_window().reason(), "test");
  EXPECT_EQ(r.header.flight_window().events_rotated_out(), flight->events_rotated_out());
  EXPECT_EQ(r.header.flight_window().recording_start_clock().monotonic_ns(), kStartNs);
  // The trace reads as the window: its clock starts where the window does.
  EXPECT_EQ(r.header.start_clock().monotonic_ns(), r.header.flight_window().start_ns());
  EXPECT_EQ(r.header.start_clock().realtime_ns() - 5 * kStartNs, r.header.start_clock().monotonic_ns() - kStartNs);

  // The table first (the process, then its thread), then the window's
  // events: the last ones appended, in order, none missing.
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_TRUE(r.events[0].has_process_start());
  EXPECT_TRUE(r.events[0].process_start().preexisting());
  EXPECT_TRUE(r.events[0].process_start().is_root());
  EXPECT_TRUE(r.events[1].has_thread_start());
  EXPECT_EQ(r.events[1].tid(), 101u);
  EXPECT_EQ(r.events[1].ts_ns(), r.header.flight_window().start_ns());
  std::vector<int32_t> seqs;
  for (size_t i = 2; i < r.events.size(); ++i) {
    ASSERT_TRUE(r.events[i].has_off_cpu()) << "event " << i << " is not the window's";
    seqs.push_back(r.events[i].off_cpu().syscall_nr());
  }
  ASSERT_EQ(seqs.size(), flight->window_events());
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(seqs[i], kEvents - static_cast<int32_t>(seqs.size()) + static_cast<int32_t>(i));
  }
  EXPECT_GE(r.header.flight_window().start_ns(), kStartNs);
  EXPECT_LE(r.header.flight_window().start_ns(), r.events[2].ts_ns());
  EXPECT_EQ(r.header.flight_window().end_ns(), r.events.back().ts_ns());
}

TEST_F(FlightRecorderTest, DurationBoundKeepsTheSpanAndNoMore) {
  constexpr uint64_t kSpan = 8'000'000'000;  // 8 s; a segment is 1 s
  auto flight = Open(0, kSpan);
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs, 100, "job")).ok());
  // 60 s of events, one every 10 ms.
  uint64_t ts = kStartNs;
  for (int i = 0; i < 6000; ++i) {
    ts = kStartNs + 10'000'000ull * (i + 1);
    ASSERT_TRUE(flight->Append(Work(ts, 100, 100, i)).ok());
  }
  auto dump = flight->Dump(flight->DumpPath(1), v1::TraceTrailer(), "test");
  ASSERT_TRUE(dump.ok()) << dump.status();
  Read r = ReadTrace(dump->path);
  const v1::FlightWindow& w = r.header.flight_window();
  EXPECT_EQ(w.end_ns(), ts);
  // At least the span, and at most one segment more.
  EXPECT_GE(w.end_ns() - w.start_ns(), kSpan);
  EXPECT_LE(w.end_ns() - w.start_ns(), kSpan + kSpan / 8 + 20'000'000);
  EXPECT_LE(flight->segment_count(), 10u);
  // The first window event is the first after the window's start.
  ASSERT_GE(r.events.size(), 2u);
  EXPECT_TRUE(r.events[0].has_process_start());
  EXPECT_GE(r.events[1].ts_ns(), w.start_ns());
  EXPECT_LT(r.events[1].ts_ns() - 10'000'000, w.start_ns() + 1);
}

// Threads born, renamed and gone before the window opened are named as they
// stood when it opened; one that exited shortly before keeps its name for
// its late events.
TEST_F(FlightRecorderTest, TheDumpNamesEveryThreadOfTheWindow) {
  auto flight = Open(64 << 10, 0);
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs, 100, "python")).ok());
  ASSERT_TRUE(flight->Append(ThreadStart(kStartNs + 1, 100, 101, "loader")).ok());
  ASSERT_TRUE(flight->Append(ThreadStart(kStartNs + 2, 100, 102, "short-lived")).ok());
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs + 3, 200, "worker")).ok());
  v1::Event rename;
  rename.set_ts_ns(kStartNs + 4);
  rename.set_pid(100);
  rename.set_tid(100);
  rename.mutable_comm_change()->set_old_comm("python");
  rename.mutable_comm_change()->set_new_comm("trainer");
  ASSERT_TRUE(flight->Append(rename).ok());
  v1::Event exec;
  exec.set_ts_ns(kStartNs + 5);
  exec.set_pid(200);
  exec.set_tid(200);
  exec.mutable_exec()->set_filename("/bin/worker2");
  exec.mutable_exec()->set_comm("worker2");
  exec.mutable_exec()->set_old_tid(200);
  ASSERT_TRUE(flight->Append(exec).ok());
  uint64_t ts = kStartNs + 10;
  int seq = 0;
  for (; seq < 20'000; ++seq) ASSERT_TRUE(flight->Append(Work(++ts, 100, 100 + seq % 2, seq)).ok());
  v1::Event exit;
  exit.set_ts_ns(++ts);
  exit.set_pid(100);
  exit.set_tid(102);
  exit.mutable_thread_exit()->set_comm("short-lived");
  ASSERT_TRUE(flight->Append(exit).ok());
  for (; seq < 40'000; ++seq) ASSERT_TRUE(flight->Append(Work(++ts, 200, 200, seq)).ok());
  // A late event of the thread that exited (the agent's per-second totals).
  ASSERT_TRUE(flight->Append(Work(++ts, 100, 102, seq++)).ok());
  ASSERT_GT(flight->events_rotated_out(), 20'000u) << "the starts must have rotated out for this test";

  auto dump = flight->Dump(flight->DumpPath(1), v1::TraceTrailer(), "test");
  ASSERT_TRUE(dump.ok()) << dump.status();
  Read r = ReadTrace(dump->path);
  std::map<uint32_t, std::string> thread_comm;
  std::set<uint32_t> processes;
  for (const v1::Event& e : r.events) {
    if (e.has_process_start()) {
      processes.insert(e.pid());
      thread_comm[e.tid()] = e.process_start().comm();
    } else if (e.has_thread_start()) {
      EXPECT_TRUE(processes.count(e.pid())) << "thread " << e.tid() << " before its process";
      thread_comm[e.tid()] = e.thread_start().comm();
    } else if (e.tid() != 0) {
      EXPECT_TRUE(thread_comm.count(e.tid())) << "event of unknown thread " << e.tid();
      EXPECT_TRUE(processes.count(e.pid())) << "event of unknown process " << e.pid();
    }
  }
  EXPECT_EQ(thread_comm[100], "trainer");
  EXPECT_EQ(thread_comm[101], "loader");
  EXPECT_EQ(thread_comm[102], "short-lived");
  EXPECT_EQ(thread_comm[200], "worker2");
}

TEST_F(FlightRecorderTest, WithoutRotationTheDumpIsTheWholeRecording) {
  auto flight = Open(1 << 20, 0);
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs + 5, 100, "job")).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(flight->Append(Work(kStartNs + 10 + i, 100, 100, i)).ok());
  auto dump = flight->Dump(flight->DumpPath(1), v1::TraceTrailer(), "test");
  ASSERT_TRUE(dump.ok()) << dump.status();
  Read r = ReadTrace(dump->path);
  EXPECT_EQ(r.events.size(), 101u);
  EXPECT_EQ(r.header.start_clock().monotonic_ns(), kStartNs);
  EXPECT_EQ(r.header.flight_window().events_rotated_out(), 0u);
  EXPECT_FALSE(r.events[0].process_start().preexisting()) << "the real start, not a table entry";
}

TEST_F(FlightRecorderTest, TheEndWritesTheOutputAndRemovesTheRing) {
  // Leftovers of an earlier run in the ring's directory are not this run's.
  ASSERT_EQ(mkdir((dir_ + "/run.gpuos.flight").c_str(), 0755), 0);
  { std::FILE* f = std::fopen((dir_ + "/run.gpuos.flight/seg-000099.gpuos").c_str(), "w"); std::fclose(f); }
  auto flight = Open(64 << 10, 0);
  EXPECT_EQ(SegmentFiles(flight->ring_dir()), 1u) << "the old segment is gone, the first new one is there";
  ASSERT_TRUE(flight->Append(ProcessStart(kStartNs, 100, "job")).ok());
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(flight->Append(Work(kStartNs + 10 + i, 100, 100, i)).ok());
  flight->set_end_reason("the end of the recording (test)");
  v1::TraceTrailer trailer;
  trailer.set_root_exited(true);
  ASSERT_TRUE(flight->WriteTrailer(trailer).ok());
  Read r = ReadTrace(dir_ + "/run.gpuos");
  ASSERT_TRUE(r.has_trailer);
  EXPECT_TRUE(r.trailer.root_exited());
  EXPECT_EQ(r.trailer.events_written(), r.events.size());
  EXPECT_EQ(r.header.flight_window().reason(), "the end of the recording (test)");
  struct stat st {};
  EXPECT_NE(stat((dir_ + "/run.gpuos.flight").c_str(), &st), 0) << "the ring directory is left behind";
}

TEST_F(FlightRecorderTest, NeedsExactlyOneBound) {
  FlightRecorder::Options options;
  options.output_path = dir_ + "/x.gpuos";
  EXPECT_FALSE(FlightRecorder::Create(options).ok());
  options.max_bytes = 1 << 20;
  options.max_span_ns = 1'000'000'000;
  EXPECT_FALSE(FlightRecorder::Create(options).ok());
}

}  // namespace
}  // namespace gpuos
