// Tests of the exporter's external sort: records spilled to many runs and
// merged back come out in exactly the order an in-memory sort gives, however
// late a record arrives; spill files live in the given directory and vanish.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "export/timeline/record_sorter.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

class RecordSorterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/perfetto_record_sorter_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  size_t FilesInDir() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }
  std::string dir_;
};

std::vector<TimelineRecord> RandomRecords(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TimelineRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    TimelineRecord& r = records[i];
    r = TimelineRecord{};
    // Mostly increasing times with some records seconds late, and ties.
    const uint64_t base = 1'000'000'000ull + i * 1000;
    r.ts = (rng() % 10 == 0) ? base - (rng() % 3'000'000'000ull) : base - base % 5000;
    r.dur = rng() % 4 == 0 ? 0 : rng() % 100000;
    r.ordinal = i;
    r.track = static_cast<uint32_t>(rng() % 13);
    r.name = static_cast<uint32_t>(rng());
    r.pid = static_cast<uint32_t>(rng() % 4000000);
    r.kind = static_cast<RecordKind>(rng() % 16);
    for (uint64_t& word : r.payload) word = rng() % 3 == 0 ? 0 : rng() >> (rng() % 64);
  }
  return records;
}

TEST_F(RecordSorterTest, SpilledRunsMergeIntoTheInMemoryOrder) {
  std::vector<TimelineRecord> records = RandomRecords(20000, 7);
  // Room for about a hundred records: some two hundred runs.
  RecordSorter sorter(dir_, 100 * sizeof(TimelineRecord));
  for (const TimelineRecord& r : records) ASSERT_TRUE(sorter.Add(r).ok());
  ASSERT_TRUE(sorter.StartMerge().ok());
  EXPECT_GT(sorter.runs_spilled(), 150u);
  // Runs are written compactly.
  EXPECT_LT(sorter.bytes_spilled(), records.size() * sizeof(TimelineRecord) / 2);
  // Spill files are unlinked as soon as they are created.
  EXPECT_EQ(FilesInDir(), 0u);

  std::vector<TimelineRecord> expected = records;
  std::sort(expected.begin(), expected.end(), RecordBefore);
  TimelineRecord r;
  size_t i = 0;
  while (sorter.Next(&r)) {
    ASSERT_LT(i, expected.size());
    ASSERT_EQ(r.ordinal, expected[i].ordinal) << "at " << i;
    // Every field survives the trip through a run file.
    ASSERT_EQ(memcmp(&r, &expected[i], sizeof r), 0) << "at " << i;
    ++i;
  }
  EXPECT_TRUE(sorter.status().ok()) << sorter.status();
  EXPECT_EQ(i, records.size());
}

TEST_F(RecordSorterTest, SmallInputNeverTouchesTheDisk) {
  std::vector<TimelineRecord> records = RandomRecords(500, 3);
  RecordSorter sorter(dir_, 1 << 20);
  for (const TimelineRecord& r : records) ASSERT_TRUE(sorter.Add(r).ok());
  ASSERT_TRUE(sorter.StartMerge().ok());
  EXPECT_EQ(sorter.runs_spilled(), 0u);
  TimelineRecord previous{};
  TimelineRecord r;
  size_t n = 0;
  while (sorter.Next(&r)) {
    if (n > 0) {
      EXPECT_FALSE(RecordBefore(r, previous));
    }
    previous = r;
    ++n;
  }
  EXPECT_EQ(n, records.size());
}

TEST_F(RecordSorterTest, EqualStartsPutTheLongerSliceFirst) {
  RecordSorter sorter(dir_, 2 * sizeof(TimelineRecord));
  TimelineRecord child{};
  child.ts = 100;
  child.dur = 10;
  child.ordinal = 0;
  TimelineRecord parent{};
  parent.ts = 100;
  parent.dur = 50;
  parent.ordinal = 1;
  TimelineRecord earlier{};
  earlier.ts = 99;
  earlier.ordinal = 2;
  for (const TimelineRecord& r : {child, parent, earlier}) ASSERT_TRUE(sorter.Add(r).ok());
  ASSERT_TRUE(sorter.StartMerge().ok());
  std::vector<uint64_t> order;
  TimelineRecord r;
  while (sorter.Next(&r)) order.push_back(r.ordinal);
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 1, 0}));
}

TEST_F(RecordSorterTest, UnwritableTempDirIsAnActionableError) {
  RecordSorter sorter("/nonexistent/perfetto-sort", 2 * sizeof(TimelineRecord));
  TimelineRecord r{};
  absl::Status status;
  // The buffer holds at least 16 records; the 17th spills.
  for (int i = 0; i < 100 && status.ok(); ++i) status = sorter.Add(r);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("TMPDIR"), std::string::npos) << status;
}

}  // namespace
}  // namespace gpuos
