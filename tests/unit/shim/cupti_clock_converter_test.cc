// Tests of cupti_shim/cupti_clock_converter: mapping CUPTI's clock or the
// TSC onto CLOCK_MONOTONIC through paired readings.  Pure logic.
#include "cupti_clock_converter.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

TEST(ClockConverterTest, NoReadingIsIdentityAndZeroStaysZero) {
  ClockConverter clock;
  EXPECT_EQ(clock.ToMonotonic(12345), 12345u);
  EXPECT_EQ(clock.ToMonotonic(0), 0u);
  clock.AddReading(1'000'000, 5'000);
  EXPECT_EQ(clock.ToMonotonic(0), 0u);
}

TEST(ClockConverterTest, OneReadingShiftsAtTheNominalRate) {
  // CUPTI's ns clock, 1.7e18 (realtime-like) against 9e9 monotonic.
  ClockConverter ns_clock(1.0);
  ns_clock.AddReading(1'700'000'000'000'000'000ull, 9'000'000'000ull);
  EXPECT_EQ(ns_clock.ToMonotonic(1'700'000'000'000'000'500ull), 9'000'000'500ull);
  EXPECT_EQ(ns_clock.ToMonotonic(1'699'999'999'999'999'000ull), 8'999'999'000ull);

  // A 2.5 GHz TSC: 0.4 ns per tick.
  ClockConverter tsc(0.4);
  tsc.AddReading(10'000'000, 1'000'000'000);
  EXPECT_EQ(tsc.ToMonotonic(10'002'500), 1'000'001'000u);
}

TEST(ClockConverterTest, InterpolatesBetweenReadingsAndFollowsDrift) {
  // The source clock runs 100 ppm fast for the first second, then exact.
  ClockConverter clock(1.0, /*min_spacing_ns=*/1);
  clock.AddReading(1'000'000'000, 1'000'000'000);
  clock.AddReading(2'000'100'000, 2'000'000'000);
  clock.AddReading(3'000'100'000, 3'000'000'000);
  EXPECT_EQ(clock.ToMonotonic(1'500'050'000), 1'500'000'000u);  // middle of segment 1
  EXPECT_EQ(clock.ToMonotonic(2'500'100'000), 2'500'000'000u);  // middle of segment 2
  EXPECT_EQ(clock.ToMonotonic(2'000'100'000), 2'000'000'000u);  // on a reading
  // Past the last reading: the last segment's rate.
  EXPECT_EQ(clock.ToMonotonic(4'000'100'000), 4'000'000'000u);
  // Before the first: the first segment's rate.
  EXPECT_NEAR(static_cast<double>(clock.ToMonotonic(100'000'000)), 100'089'991.0, 2.0);  // 9e8 ticks x 1/1.0001
  EXPECT_NEAR(clock.current_slope(), 1.0, 1e-12);
}

TEST(ClockConverterTest, KeepsOrderAcrossSegments) {
  // Readings with jitter; any two source times keep their order after
  // mapping (a kernel never moves before its launch call).
  std::mt19937_64 random(7);
  ClockConverter clock(1.0, /*min_spacing_ns=*/1);
  uint64_t source = 1'000'000, mono = 50'000'000;
  for (int i = 0; i < 50; ++i) {
    source += 10'000'000 + random() % 1000;
    mono += 10'000'000 + random() % 1000;
    ASSERT_TRUE(clock.AddReading(source, mono));
  }
  uint64_t previous = 0;
  for (uint64_t t = 500'000; t < source + 20'000'000; t += 9'973) {
    const uint64_t mapped = clock.ToMonotonic(t);
    ASSERT_GE(mapped, previous) << "at source " << t;
    previous = mapped;
  }
}

TEST(ClockConverterTest, RefusesReadingsOutOfOrder) {
  ClockConverter clock;
  EXPECT_TRUE(clock.AddReading(100, 1000));
  EXPECT_FALSE(clock.AddReading(100, 2000));  // source did not advance
  EXPECT_FALSE(clock.AddReading(200, 900));   // monotonic went back
  EXPECT_EQ(clock.readings(), 1u);
}

TEST(ClockConverterTest, CloseReadingsReplaceTheLastOneAndOldOnesGo) {
  ClockConverter clock(1.0, /*min_spacing_ns=*/1'000, /*max_readings=*/3);
  EXPECT_TRUE(clock.AddReading(10'000, 10'000));
  EXPECT_TRUE(clock.AddReading(10'100, 10'100));  // a first segment, however short
  EXPECT_EQ(clock.readings(), 2u);
  EXPECT_TRUE(clock.AddReading(10'500, 10'500));  // segment 10'000..10'500 < 1 us
  EXPECT_EQ(clock.readings(), 2u);
  EXPECT_TRUE(clock.AddReading(12'000, 12'000));
  EXPECT_TRUE(clock.AddReading(14'000, 14'000));
  EXPECT_EQ(clock.readings(), 3u);  // the oldest went
  EXPECT_EQ(clock.ToMonotonic(13'000), 13'000u);
}

TEST(ClockConverterTest, NeverMapsToZeroOrBelow) {
  ClockConverter clock(1.0);
  clock.AddReading(1'000'000, 500);
  EXPECT_EQ(clock.ToMonotonic(1), 1u);  // would be negative
}

}  // namespace
}  // namespace gpuos_shim
