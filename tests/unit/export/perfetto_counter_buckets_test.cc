// Tests of the exporter's bucketed counters: amounts spread over the buckets
// an interval covers, values reported at bucket starts in time order, only
// on change, with a zero after activity stops.
#include <tuple>
#include <vector>

#include "export/timeline/counter_buckets.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

using Values = std::vector<std::tuple<uint64_t, uint32_t, double>>;

TEST(CounterBucketsTest, SpreadsIntervalsAndReportsChangesAtBucketStarts) {
  CounterBuckets buckets(100);
  buckets.DefineTrack(1, 1.0);
  buckets.DefineTrack(2, 10.0);
  Values out;
  auto emit = [&](uint64_t ts, uint32_t track, double value) { out.emplace_back(ts, track, value); };

  buckets.Add(1, 150, 350, 200);  // 50 in [100,200), 100 in [200,300), 50 in [300,400)
  buckets.Add(2, 160, 160, 3);    // a point amount: all in bucket [100,200)
  buckets.AdvanceTo(250, emit);   // closes [100,200) only
  EXPECT_EQ(out, (Values{{100, 1, 50}, {100, 2, 30}}));
  out.clear();

  buckets.Add(2, 260, 260, 3);  // same value as before: not reported again
  buckets.AdvanceTo(1000, emit);
  // Track 2 drops to zero at 300; track 1 goes 100, 50, then zero at 400.
  EXPECT_EQ(out, (Values{{200, 1, 100}, {300, 1, 50}, {300, 2, 0}, {400, 1, 0}}));
  out.clear();

  // After a long idle gap, one value and its closing zero.
  buckets.Add(1, 5050, 5060, 7);
  buckets.Finish(emit);
  EXPECT_EQ(out, (Values{{5000, 1, 7}, {5100, 1, 0}}));
}

TEST(CounterBucketsTest, UndefinedTracksAreIgnored) {
  CounterBuckets buckets(100);
  Values out;
  buckets.Add(9, 0, 50, 5);
  buckets.Finish([&](uint64_t ts, uint32_t track, double value) { out.emplace_back(ts, track, value); });
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace gpuos
