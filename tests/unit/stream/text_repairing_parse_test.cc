// stream/text_repairing_parse.h: a record or shim message whose text is not
// UTF-8 (a trace recorded before names were repaired, an old shim) still
// parses, with the bad bytes as U+FFFD, instead of being lost whole; and
// the reader reads such a file to its end.
#include "stream/text_repairing_parse.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gpuos_trace.pb.h"
#include "gtest/gtest.h"
#include "stream/record_framing.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

// `message` serialized with every "@@" in its text replaced by the bytes
// E6 95 (a character cut in two): what the writer put on disk before.
template <typename M>
std::string WithCutCharacters(const M& message) {
  std::string bytes = message.SerializeAsString();
  for (size_t at = bytes.find("@@"); at != std::string::npos; at = bytes.find("@@", at)) {
    bytes.replace(at, 2, "\xE6\x95");
  }
  return bytes;
}

TEST(TextRepairingParseTest, ABatchWithACutNameIsKeptWithTheNameRepaired) {
  v1::Record record;
  v1::EventBatch* batch = record.mutable_batch();
  batch->add_events()->mutable_comm_change()->set_new_comm("worker@@");
  batch->add_events()->mutable_nvtx_range()->set_name("step 1");
  const std::string bytes = WithCutCharacters(record);
  v1::Record plain;
  ASSERT_FALSE(plain.ParseFromString(bytes)) << "libprotobuf accepts it now: this file is no longer needed";

  v1::Record parsed;
  ASSERT_TRUE(ParseRepairingText(bytes, &parsed));
  ASSERT_EQ(parsed.batch().events_size(), 2);
  EXPECT_EQ(parsed.batch().events(0).comm_change().new_comm(), "worker\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(parsed.batch().events(1).nvtx_range().name(), "step 1");
}

TEST(TextRepairingParseTest, HeaderTextAndMapValuesAreRepairedToo) {
  v1::Record record;
  record.mutable_header()->add_command_line("python3");
  record.mutable_header()->add_command_line("train@@.py");
  (*record.mutable_header()->mutable_syscall_names())[1] = "write@@";
  v1::Record parsed;
  ASSERT_TRUE(ParseRepairingText(WithCutCharacters(record), &parsed));
  EXPECT_EQ(parsed.header().command_line(1), "train\xEF\xBF\xBD\xEF\xBF\xBD.py");
  EXPECT_EQ(parsed.header().syscall_names().at(1), "write\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TextRepairingParseTest, GarbageIsStillRefused) {
  v1::Record record;
  EXPECT_FALSE(ParseRepairingText(std::string(64, '\xFF'), &record));
  EXPECT_FALSE(ParseRepairingText("\x0a\x05\x08\x01", &record));
}

TEST(TextRepairingParseTest, TheReaderReadsAnOldTraceWithACutNameToItsEnd) {
  std::string file = EncodeFileMagic();
  v1::Record header;
  header.mutable_header()->set_format_version(kFormatVersion);
  AppendFrame(header.SerializeAsString(), &file);
  v1::Record batch;
  batch.mutable_batch()->add_events()->mutable_process_start()->set_comm("a@@");
  AppendFrame(WithCutCharacters(batch), &file);
  v1::Record later;
  later.mutable_batch()->add_events()->mutable_nvtx_range()->set_name("step 2");
  AppendFrame(later.SerializeAsString(), &file);
  v1::Record trailer;
  trailer.mutable_trailer()->set_events_written(2);
  AppendFrame(trailer.SerializeAsString(), &file);

  char path[] = "/tmp/gpuos-repair-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, file.data(), file.size()), static_cast<ssize_t>(file.size()));
  close(fd);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int events = 0;
  bool trailer_seen = false;
  absl::Status status = ForEachEvent(
      **reader, [&](const v1::Event&) { ++events; }, [&](const v1::TraceTrailer&) { trailer_seen = true; });
  unlink(path);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(events, 2);
  EXPECT_TRUE(trailer_seen);
}

}  // namespace
}  // namespace gpuos
