// The trace header's host facts: the online CPU count is what the
// diagnosis judges a job's data-worker count against.
#include "record/host_info.h"

#include <time.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

TEST(HostInfoTest, HeaderCarriesTheOnlineCpuCount) {
  v1::TraceHeader header;
  FillHostInfo(&header);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(online, 0);
  EXPECT_EQ(header.online_cpus(), static_cast<uint32_t>(online));
  EXPECT_GT(header.page_size(), 0u);
}

// The pair maps monotonic to wall-clock time within the uncertainty it
// states (gpuos-trace merge aligns hosts with it): a second pair read right
// after gives the same offset to within both uncertainties plus any NTP
// adjustment in between, which a few microseconds cannot hold.
TEST(HostInfoTest, ClockPairStatesItsUncertainty) {
  const v1::ClockPair first = ReadClockPair();
  const v1::ClockPair second = ReadClockPair();
  EXPECT_GT(first.uncertainty_ns(), 0u);
  EXPECT_LT(first.uncertainty_ns(), 1'000'000u);
  const int64_t offset1 = static_cast<int64_t>(first.realtime_ns()) - static_cast<int64_t>(first.monotonic_ns());
  const int64_t offset2 = static_cast<int64_t>(second.realtime_ns()) - static_cast<int64_t>(second.monotonic_ns());
  EXPECT_LE(std::llabs(offset1 - offset2),
            static_cast<int64_t>(first.uncertainty_ns() + second.uncertainty_ns()) + 1000);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  EXPECT_LE(second.monotonic_ns(), static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec);
}

}  // namespace
}  // namespace gpuos
