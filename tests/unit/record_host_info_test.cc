// The trace header's host facts: the online CPU count is what the
// diagnosis judges a job's data-worker count against.
#include "record/host_info.h"

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

}  // namespace
}  // namespace gpuos
