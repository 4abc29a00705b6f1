// Tests of the .gpuos stream: writer and reader round trips, a recorder killed
// mid-trace, and damaged files (every truncation point, byte flips, absurd
// lengths, random garbage) on real files in a temporary directory.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

class TraceStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trace_stream_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

v1::TraceHeader MakeHeader() {
  v1::TraceHeader header;
  header.set_tracer_version("test-1.2.3");
  header.set_hostname("node-7");
  header.set_kernel_release("6.18.0");
  header.set_arch("x86_64");
  header.add_command_line("python3");
  header.add_command_line("train.py");
  header.mutable_start_clock()->set_monotonic_ns(123456789);
  header.mutable_start_clock()->set_realtime_ns(1700000000000000000ull);
  header.set_tracer_pid(4242);
  header.set_root_pid(4243);
  (*header.mutable_syscall_names())[0] = "read";
  (*header.mutable_syscall_names())[202] = "futex";
  header.set_page_size(4096);
  return header;
}

// Events of several kinds, so that batches hold varied payloads.
v1::Event MakeEvent(uint64_t i) {
  v1::Event event;
  event.set_ts_ns(1000000000ull + i * 1000);
  event.set_pid(100 + static_cast<uint32_t>(i % 7));
  event.set_tid(1000 + static_cast<uint32_t>(i % 31));
  switch (i % 4) {
    case 0: {
      v1::OffCpu* off = event.mutable_off_cpu();
      off->set_duration_ns(50000 + i);
      off->set_runqueue_ns(i % 1000);
      off->set_cause(v1::OFF_CPU_CAUSE_FUTEX);
      off->set_syscall_nr(202);
      off->set_voluntary(true);
      break;
    }
    case 1: {
      v1::MmapCall* mmap = event.mutable_mmap();
      mmap->set_duration_ns(1234 + i);
      mmap->set_addr(0x7f0000000000ull + i * 4096);
      mmap->set_length(1 << 20);
      mmap->set_result(static_cast<int64_t>(0x7f0000000000ull + i * 4096));
      break;
    }
    case 2:
      event.mutable_exec()->set_filename(absl::StrCat("/usr/bin/worker-", i));
      event.mutable_exec()->set_comm("worker");
      break;
    default:
      event.mutable_page_faults()->set_last_ns(1000000000ull + i * 1000 + 999);
      event.mutable_page_faults()->set_count(static_cast<uint32_t>(i % 100));
      break;
  }
  return event;
}

v1::TraceTrailer MakeTrailer(uint64_t events) {
  v1::TraceTrailer trailer;
  trailer.mutable_end_clock()->set_monotonic_ns(999999999999ull);
  trailer.set_root_exited(true);
  trailer.set_root_wait_status(3 << 8);
  trailer.set_events_written(events);
  return trailer;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

long MaxRssKiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

// Writes header, `events` events and (optionally) a trailer.
void WriteTrace(const std::string& path, uint64_t events, TraceWriter::Options options,
                bool trailer) {
  auto writer = TraceWriter::Create(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
  for (uint64_t i = 0; i < events; ++i) ASSERT_TRUE((*writer)->Append(MakeEvent(i)).ok());
  if (trailer) {
    ASSERT_TRUE((*writer)->WriteTrailer(MakeTrailer(events)).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

// Everything a reader yields from a file.
struct ReadResult {
  absl::Status open_status;
  std::vector<v1::Record> records;
  std::vector<uint64_t> ends;  // offset() after each record; [0] is the header's end
  absl::Status status;
  uint64_t offset = 0;
};

ReadResult ReadAll(const std::string& path) {
  ReadResult result;
  auto reader = TraceReader::Open(path);
  result.open_status = reader.status();
  if (!reader.ok()) return result;
  result.ends.push_back((*reader)->offset());
  v1::Record record;
  while ((*reader)->Next(&record)) {
    result.records.push_back(record);
    result.ends.push_back((*reader)->offset());
  }
  result.status = (*reader)->status();
  result.offset = (*reader)->offset();
  return result;
}

bool OneLine(const absl::Status& status) {
  return !status.message().empty() && !absl::StrContains(status.message(), '\n');
}

TEST_F(TraceStreamTest, RoundTripAcrossBatches) {
  const std::string path = Path("round.gpuos");
  TraceWriter::Options options;
  options.max_batch_events = 100;
  auto writer = TraceWriter::Create(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
  constexpr uint64_t kEvents = 1050;
  for (uint64_t i = 0; i < kEvents; ++i) ASSERT_TRUE((*writer)->Append(MakeEvent(i)).ok());
  EXPECT_EQ((*writer)->events_written(), kEvents);
  ASSERT_TRUE((*writer)->WriteTrailer(MakeTrailer(kEvents)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->bytes_written(), FileSize(path));

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  v1::TraceHeader expected_header = MakeHeader();
  expected_header.set_format_version(kFormatVersion);
  EXPECT_TRUE(MessageDifferencer::Equals((*reader)->header(), expected_header));

  v1::Record record;
  int batches = 0;
  uint64_t next = 0;
  int trailers = 0;
  while ((*reader)->Next(&record)) {
    ASSERT_EQ(trailers, 0) << "a record after the trailer";
    if (record.has_batch()) {
      ++batches;
      EXPECT_LE(record.batch().events_size(), 100);
      for (const v1::Event& event : record.batch().events()) {
        ASSERT_TRUE(MessageDifferencer::Equals(event, MakeEvent(next))) << "event " << next;
        ++next;
      }
    } else {
      ASSERT_TRUE(record.has_trailer());
      EXPECT_TRUE(MessageDifferencer::Equals(record.trailer(), MakeTrailer(kEvents)));
      ++trailers;
    }
  }
  EXPECT_TRUE((*reader)->status().ok()) << (*reader)->status();
  EXPECT_EQ(next, kEvents);
  EXPECT_EQ(batches, 11);  // ten full batches, and 50 events flushed by the trailer
  EXPECT_EQ(trailers, 1);
  EXPECT_EQ((*reader)->offset(), FileSize(path));
}

TEST_F(TraceStreamTest, ForEachEventDeliversEventsAndTrailer) {
  const std::string path = Path("foreach.gpuos");
  TraceWriter::Options options;
  options.max_batch_events = 7;
  WriteTrace(path, 100, options, /*trailer=*/true);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  uint64_t next = 0;
  int trailers = 0;
  absl::Status status = ForEachEvent(
      **reader,
      [&](const v1::Event& event) {
        EXPECT_TRUE(MessageDifferencer::Equals(event, MakeEvent(next))) << "event " << next;
        ++next;
      },
      [&](const v1::TraceTrailer& trailer) {
        ++trailers;
        EXPECT_EQ(trailer.events_written(), 100u);
      });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(next, 100u);
  EXPECT_EQ(trailers, 1);
}

TEST_F(TraceStreamTest, WriterBuffersUntilBatchIsFullOrFlushed) {
  const std::string path = Path("buffer.gpuos");
  TraceWriter::Options options;
  options.max_batch_events = 10;
  auto writer = TraceWriter::Create(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(FileSize(path), kFileMagicBytes);  // the magic goes out at once
  ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
  const uint64_t after_header = FileSize(path);
  EXPECT_GT(after_header, kFileMagicBytes);

  for (int i = 0; i < 9; ++i) ASSERT_TRUE((*writer)->Append(MakeEvent(i)).ok());
  EXPECT_EQ(FileSize(path), after_header) << "events written before the batch was full";
  ASSERT_TRUE((*writer)->Append(MakeEvent(9)).ok());
  const uint64_t after_batch = FileSize(path);
  EXPECT_GT(after_batch, after_header) << "a full batch was not written";

  ASSERT_TRUE((*writer)->Append(MakeEvent(10)).ok());
  EXPECT_EQ(FileSize(path), after_batch);
  ASSERT_TRUE((*writer)->Flush().ok());
  const uint64_t after_flush = FileSize(path);
  EXPECT_GT(after_flush, after_batch);
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_EQ(FileSize(path), after_flush) << "an empty flush wrote something";
  EXPECT_EQ((*writer)->bytes_written(), after_flush);
}

TEST_F(TraceStreamTest, WriterCutsBatchesByBytes) {
  const std::string path = Path("bytes.gpuos");
  TraceWriter::Options options;
  options.max_batch_events = 1000000;
  options.max_batch_bytes = 1000;
  auto writer = TraceWriter::Create(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
  v1::Event big;
  big.mutable_exec()->set_filename(std::string(300, 'x'));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*writer)->Append(big).ok());
  ASSERT_TRUE((*writer)->Close().ok());

  ReadResult result = ReadAll(path);
  ASSERT_TRUE(result.open_status.ok()) << result.open_status;
  EXPECT_TRUE(result.status.ok()) << result.status;
  int events = 0;
  for (const v1::Record& record : result.records) {
    ASSERT_TRUE(record.has_batch());
    // Cut once the batch reaches 1000 bytes: at most 4 events of ~306.
    EXPECT_LE(record.batch().events_size(), 4);
    EXPECT_LT(record.ByteSizeLong(), 1000u + 320u);
    events += record.batch().events_size();
  }
  EXPECT_EQ(events, 20);
  EXPECT_GE(result.records.size(), 5u);
}

TEST_F(TraceStreamTest, WriterRefusesMisuse) {
  const std::string path = Path("misuse.gpuos");
  mode_t old_umask = umask(0);
  auto writer = TraceWriter::Create(path);
  umask(old_umask);
  ASSERT_TRUE(writer.ok()) << writer.status();

  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  int flags = fcntl((*writer)->fd(), F_GETFD);
  EXPECT_TRUE(flags & FD_CLOEXEC) << "the trace fd would leak into the traced command";

  absl::Status status = (*writer)->Append(MakeEvent(0));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(OneLine(status));
  ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
  EXPECT_FALSE((*writer)->WriteHeader(MakeHeader()).ok());
  ASSERT_TRUE((*writer)->Append(MakeEvent(0)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->fd(), -1);
  status = (*writer)->Append(MakeEvent(1));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("closed"));
  EXPECT_FALSE((*writer)->Flush().ok());
  EXPECT_FALSE((*writer)->WriteTrailer(MakeTrailer(1)).ok());
  EXPECT_TRUE((*writer)->Close().ok()) << "a second Close should be harmless";

  // The event appended before Close was flushed by it.
  ReadResult result = ReadAll(path);
  ASSERT_TRUE(result.open_status.ok()) << result.open_status;
  ASSERT_EQ(result.records.size(), 1u);
  EXPECT_EQ(result.records[0].batch().events_size(), 1);
}

TEST_F(TraceStreamTest, CreateInMissingDirectoryFails) {
  auto writer = TraceWriter::Create(Path("no/such/dir/x.gpuos"));
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(std::string(writer.status().message()), HasSubstr(strerror(ENOENT)));
  EXPECT_TRUE(OneLine(writer.status()));
}

TEST_F(TraceStreamTest, DestructorFlushesAndCloses) {
  const std::string path = Path("dtor.gpuos");
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->WriteHeader(MakeHeader()).ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*writer)->Append(MakeEvent(i)).ok());
  }
  ReadResult result = ReadAll(path);
  ASSERT_TRUE(result.open_status.ok()) << result.open_status;
  EXPECT_TRUE(result.status.ok());
  ASSERT_EQ(result.records.size(), 1u);
  EXPECT_EQ(result.records[0].batch().events_size(), 5);
}

// A recorder killed with SIGKILL after a Flush(): what it flushed is
// readable, what it had only buffered is lost, and the file is clean.
TEST_F(TraceStreamTest, KilledRecorderIsReadableUpToLastFlush) {
  const std::string path = Path("killed.gpuos");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    TraceWriter::Options options;
    options.max_batch_events = 100;
    auto writer = TraceWriter::Create(path, options);
    if (!writer.ok() || !(*writer)->WriteHeader(MakeHeader()).ok()) _exit(1);
    for (int i = 0; i < 250; ++i) {
      if (!(*writer)->Append(MakeEvent(i)).ok()) _exit(1);
    }
    if (!(*writer)->Flush().ok()) _exit(1);
    for (int i = 250; i < 280; ++i) {  // buffered only, never flushed
      if (!(*writer)->Append(MakeEvent(i)).ok()) _exit(1);
    }
    char c = 'r';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the recorder child failed";
  close(ready[0]);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status));

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  uint64_t next = 0;
  bool trailer = false;
  absl::Status status = ForEachEvent(
      **reader,
      [&](const v1::Event& event) {
        EXPECT_TRUE(MessageDifferencer::Equals(event, MakeEvent(next)));
        ++next;
      },
      [&](const v1::TraceTrailer&) { trailer = true; });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(next, 250u);
  EXPECT_FALSE(trailer);
}

// A small file with a header, three batches and a trailer.
std::string WriteSmallTrace(const std::string& path) {
  TraceWriter::Options options;
  options.max_batch_events = 3;
  WriteTrace(path, 7, options, /*trailer=*/true);
  return ReadBytes(path);
}

TEST_F(TraceStreamTest, TruncationAtEveryOffset) {
  const std::string full_path = Path("full.gpuos");
  const std::string bytes = WriteSmallTrace(full_path);
  const ReadResult full = ReadAll(full_path);
  ASSERT_TRUE(full.open_status.ok());
  ASSERT_TRUE(full.status.ok());
  ASSERT_EQ(full.records.size(), 4u);  // batches of 3, 3, 1 and the trailer
  const uint64_t header_end = full.ends[0];
  ASSERT_EQ(full.ends.back(), bytes.size());

  const std::string path = Path("cut.gpuos");
  for (uint64_t cut = 0; cut <= bytes.size(); ++cut) {
    SCOPED_TRACE(absl::StrCat("cut at ", cut, " of ", bytes.size()));
    WriteBytes(path, bytes.substr(0, cut));
    ReadResult result = ReadAll(path);
    if (cut < header_end) {
      ASSERT_FALSE(result.open_status.ok());
      EXPECT_TRUE(OneLine(result.open_status)) << result.open_status;
      if (cut == 0) {
        EXPECT_THAT(std::string(result.open_status.message()), HasSubstr("empty"));
      } else if (cut >= kFileMagicBytes) {
        EXPECT_THAT(std::string(result.open_status.message()), HasSubstr("header"));
      }
      continue;
    }
    ASSERT_TRUE(result.open_status.ok()) << result.open_status;
    // Exactly the records that end at or before the cut, unchanged.
    size_t complete = 0;
    while (complete < full.records.size() && full.ends[complete + 1] <= cut) ++complete;
    ASSERT_EQ(result.records.size(), complete);
    for (size_t i = 0; i < complete; ++i) {
      EXPECT_TRUE(MessageDifferencer::Equals(result.records[i], full.records[i]));
    }
    const uint64_t boundary = full.ends[complete];
    EXPECT_EQ(result.offset, boundary);
    if (cut == boundary) {
      EXPECT_TRUE(result.status.ok()) << result.status;
    } else {
      ASSERT_EQ(result.status.code(), absl::StatusCode::kDataLoss) << result.status;
      EXPECT_TRUE(OneLine(result.status));
      const std::string message(result.status.message());
      EXPECT_THAT(message, HasSubstr(absl::StrCat("byte offset ", boundary)));
      EXPECT_THAT(message, HasSubstr(cut - boundary < kFrameHeaderBytes ? "truncated frame header"
                                                                        : "truncated payload"));
    }
  }
}

TEST_F(TraceStreamTest, EveryByteFlipIsDetected) {
  const std::string full_path = Path("full.gpuos");
  const std::string bytes = WriteSmallTrace(full_path);
  const ReadResult full = ReadAll(full_path);
  ASSERT_TRUE(full.status.ok());

  const std::string path = Path("flipped.gpuos");
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      SCOPED_TRACE(absl::StrCat("byte ", at, " xor ", mask));
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ mask);
      WriteBytes(path, damaged);
      ReadResult result = ReadAll(path);
      if (at < full.ends[0]) {  // magic or header record
        ASSERT_FALSE(result.open_status.ok());
        EXPECT_TRUE(OneLine(result.open_status)) << result.open_status;
        continue;
      }
      ASSERT_TRUE(result.open_status.ok()) << result.open_status;
      ASSERT_EQ(result.status.code(), absl::StatusCode::kDataLoss)
          << "undetected damage: " << result.status;
      EXPECT_TRUE(OneLine(result.status));
      // What was delivered is the undamaged prefix.
      ASSERT_LE(result.records.size(), full.records.size());
      for (size_t i = 0; i < result.records.size(); ++i) {
        EXPECT_TRUE(MessageDifferencer::Equals(result.records[i], full.records[i]));
      }
      EXPECT_LE(result.offset, at);
    }
  }
}

// magic + a valid header record, to which damaged frames are appended.
std::string GoodPrefix() {
  std::string bytes = EncodeFileMagic();
  v1::Record header;
  *header.mutable_header() = MakeHeader();
  AppendFrame(header.SerializeAsString(), &bytes);
  return bytes;
}

std::string FrameHeader(uint32_t length, uint32_t crc) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return out;
}

absl::Status NextStatus(const std::string& path) {
  ReadResult result = ReadAll(path);
  if (!result.open_status.ok()) return result.open_status;
  EXPECT_TRUE(result.records.empty());
  return result.status;
}

TEST_F(TraceStreamTest, AbsurdLengthsAreRejectedWithoutAllocating) {
  const std::string path = Path("huge.gpuos");
  const std::string prefix = GoodPrefix();
  const long rss_before = MaxRssKiB();

  WriteBytes(path, prefix + FrameHeader(0xFFFFFFFFu, 0) + std::string(16, 'x'));
  absl::Status status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("over the"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("byte offset ", prefix.size())));

  // Under the limit but beyond the end of the file: must not be allocated
  // (resizing a buffer to 60 MiB would touch it and show in peak RSS).
  WriteBytes(path, prefix + FrameHeader(60u << 20, 0) + std::string(16, 'x'));
  status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("needs ", 60u << 20, " bytes, 16 left")));

  // The same in place of the header record.
  WriteBytes(path, EncodeFileMagic() + FrameHeader(0xFFFFFFFFu, 0));
  status = NextStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("header"));
  WriteBytes(path, EncodeFileMagic() + FrameHeader(kMaxRecordBytes, 0) + "abc");
  status = NextStatus(path);
  EXPECT_THAT(std::string(status.message()), HasSubstr("needs"));

  // Bound: the reader needs a few KiB here; 16 MiB is far below the 60 MiB
  // that honouring the length would cost.
  EXPECT_LT(MaxRssKiB() - rss_before, 16 * 1024);
}

TEST_F(TraceStreamTest, DamagedFramesAreNamed) {
  const std::string path = Path("damaged.gpuos");
  const std::string prefix = GoodPrefix();
  const std::string at = absl::StrCat("byte offset ", prefix.size());

  v1::Record batch;
  *batch.mutable_batch()->add_events() = MakeEvent(1);
  const std::string payload = batch.SerializeAsString();

  WriteBytes(path, prefix + FrameHeader(static_cast<uint32_t>(payload.size()), Crc32(payload) ^ 1) +
                       payload);
  absl::Status status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("CRC mismatch"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(at));

  std::string garbage_frame;
  AppendFrame("\xff\xff\xff\xff", &garbage_frame);  // a valid CRC over non-protobuf
  WriteBytes(path, prefix + garbage_frame);
  status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("does not parse"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(at));

  // Zeros, as a file system can leave after a crash.
  WriteBytes(path, prefix + std::string(64, '\0'));
  status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("zero-length"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(at));

  WriteBytes(path, prefix + "abc");
  status = NextStatus(path);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("truncated frame header"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(at));
}

TEST_F(TraceStreamTest, OpenExplainsWhatIsWrong) {
  auto message = [](const std::string& path) {
    auto reader = TraceReader::Open(path);
    EXPECT_FALSE(reader.ok());
    EXPECT_TRUE(OneLine(reader.status())) << reader.status();
    return std::string(reader.status().message());
  };
  const std::string missing = Path("missing.gpuos");
  EXPECT_THAT(message(missing), HasSubstr(strerror(ENOENT)));
  EXPECT_THAT(message(missing), HasSubstr(missing));
  EXPECT_EQ(TraceReader::Open(missing).status().code(), absl::StatusCode::kNotFound);

  const std::string path = Path("bad.gpuos");
  WriteBytes(path, "");
  EXPECT_THAT(message(path), HasSubstr("empty"));
  WriteBytes(path, "PK\x03\x04 this is a zip file, not a trace");
  EXPECT_THAT(message(path), HasSubstr("not a gpuos-trace file"));
  WriteBytes(path, "x");
  EXPECT_THAT(message(path), HasSubstr("not a gpuos-trace file"));

  std::string version2(kFileMagic, sizeof(kFileMagic));
  version2 += std::string("\x02\x00\x00\x00", 4);
  WriteBytes(path, version2 + GoodPrefix().substr(kFileMagicBytes));
  EXPECT_THAT(message(path), HasSubstr("unsupported format version 2"));

  WriteBytes(path, EncodeFileMagic());
  EXPECT_THAT(message(path), HasSubstr("no header record"));
  WriteBytes(path, EncodeFileMagic().substr(0, 10));
  EXPECT_THAT(message(path), HasSubstr("magic"));

  std::string batch_first = EncodeFileMagic();
  v1::Record batch;
  *batch.mutable_batch()->add_events() = MakeEvent(0);
  AppendFrame(batch.SerializeAsString(), &batch_first);
  WriteBytes(path, batch_first);
  EXPECT_THAT(message(path), HasSubstr("not a header"));

  std::string damaged_header = GoodPrefix();
  damaged_header[kFileMagicBytes + kFrameHeaderBytes + 3] ^= 0x20;
  WriteBytes(path, damaged_header);
  EXPECT_THAT(message(path), HasSubstr("damaged header record"));
  EXPECT_THAT(message(path), HasSubstr("CRC mismatch"));

  EXPECT_THAT(message(dir_), HasSubstr("not a regular file"));
}

TEST_F(TraceStreamTest, RandomGarbageNeverCrashes) {
  const std::string path = Path("garbage.gpuos");
  std::mt19937_64 rng(20240601);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::string garbage(rng() % 4096, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    // Plain garbage, garbage behind a valid magic, garbage behind a valid
    // header (reaches the frame checks), and garbage framed with a correct
    // CRC behind a valid header (reaches the protobuf parser).
    std::string framed = GoodPrefix();
    if (!garbage.empty()) AppendFrame(garbage, &framed);
    const std::string variants[] = {garbage, EncodeFileMagic() + garbage, GoodPrefix() + garbage,
                                    framed};
    for (int v = 0; v < 4; ++v) {
      WriteBytes(path, variants[v]);
      ReadResult result = ReadAll(path);
      if (v < 2) {
        EXPECT_FALSE(result.open_status.ok());
        EXPECT_TRUE(OneLine(result.open_status));
        continue;
      }
      ASSERT_TRUE(result.open_status.ok());
      if (v == 3) {
        // Random bytes may happen to parse as a Record (of unknown fields);
        // either way the one frame is all there is.
        EXPECT_LE(result.records.size(), 1u);
        if (!result.status.ok()) {
          EXPECT_THAT(std::string(result.status.message()), HasSubstr("does not parse"));
        }
      } else if (garbage.empty()) {
        EXPECT_TRUE(result.status.ok());
      } else {
        EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss) << result.status;
        EXPECT_TRUE(OneLine(result.status));
      }
    }
  }
}

// A million events written by a child process (so the writer's own memory
// does not raise this process's peak) and streamed back here.
TEST_F(TraceStreamTest, MillionEventsStreamInBoundedMemory) {
  constexpr uint64_t kEvents = 1000000;
  // Bound on peak-RSS growth, for the reader and (in the child) the writer.
  // Both hold one batch (4096 events, at most 1 MiB serialized) plus its
  // parsed form: measured about 1 MiB for the reader and 3 MiB for the
  // writer.  12 MiB leaves room for allocator slack and is under half the
  // file size (about 35 MB, checked below), so a reader or writer that kept
  // the whole stream would fail.
  constexpr long kBoundKiB = 12 * 1024;
  const std::string path = Path("million.gpuos");

  int report[2];
  ASSERT_EQ(pipe(report), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    long before = MaxRssKiB();
    auto writer = TraceWriter::Create(path);
    if (!writer.ok() || !(*writer)->WriteHeader(MakeHeader()).ok()) _exit(1);
    for (uint64_t i = 0; i < kEvents; ++i) {
      if (!(*writer)->Append(MakeEvent(i)).ok()) _exit(1);
    }
    if (!(*writer)->WriteTrailer(MakeTrailer(kEvents)).ok()) _exit(1);
    if (!(*writer)->Close().ok()) _exit(1);
    long growth = MaxRssKiB() - before;
    if (write(report[1], &growth, sizeof(growth)) != sizeof(growth)) _exit(1);
    _exit(0);
  }
  close(report[1]);
  long writer_growth = -1;
  ASSERT_EQ(read(report[0], &writer_growth, sizeof(writer_growth)),
            static_cast<ssize_t>(sizeof(writer_growth)));
  close(report[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  EXPECT_LT(writer_growth, kBoundKiB) << "writer peak RSS grew by " << writer_growth << " KiB";
  ASSERT_GT(FileSize(path), 2u * kBoundKiB * 1024)
      << "file too small for the bound to mean anything";

  const long before = MaxRssKiB();
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  uint64_t next = 0;
  uint64_t mismatches = 0;
  uint64_t trailer_events = 0;
  absl::Status status = ForEachEvent(
      **reader,
      [&](const v1::Event& event) {
        if (event.ts_ns() != 1000000000ull + next * 1000) ++mismatches;
        ++next;
      },
      [&](const v1::TraceTrailer& trailer) { trailer_events = trailer.events_written(); });
  const long reader_growth = MaxRssKiB() - before;
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(next, kEvents);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(trailer_events, kEvents);
  EXPECT_LT(reader_growth, kBoundKiB) << "reader peak RSS grew by " << reader_growth << " KiB";
  RecordProperty("file_bytes", static_cast<int>(FileSize(path)));
  RecordProperty("reader_rss_growth_kib", static_cast<int>(reader_growth));
  RecordProperty("writer_rss_growth_kib", static_cast<int>(writer_growth));
}

}  // namespace
}  // namespace gpuos
