// Tests of cupti_shim/cupti_buffer_pool: what CUPTI is promised in zeroed
// mode (every buffer handed out is all zero) holds across reuse, threads
// and the mode switch, and the pool's cap is counted, not exceeded.
#include "cupti_buffer_pool.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

constexpr size_t kBytes = size_t{64} << 10;

bool AllZero(const uint8_t* buffer, size_t bytes) {
  return std::all_of(buffer, buffer + bytes, [](uint8_t b) { return b == 0; });
}

TEST(ActivityBufferPoolTest, ZeroedModeHandsOutZeroBuffersAgainAfterUse) {
  ActivityBufferPool pool(kBytes, 4);
  pool.SetZeroed(true);
  uint8_t* buffer = pool.Take();
  ASSERT_NE(buffer, nullptr);
  EXPECT_TRUE(AllZero(buffer, kBytes));
  memset(buffer, 0xab, kBytes);  // as CUPTI's records would
  pool.Return(buffer);
  uint8_t* again = pool.Take();
  EXPECT_EQ(again, buffer);  // recycled, not a new allocation
  EXPECT_TRUE(AllZero(again, kBytes));
  EXPECT_EQ(pool.allocated(), 1u);
  pool.Return(again);
}

TEST(ActivityBufferPoolTest, WithoutZeroedModeAReturnedBufferIsNotTouched) {
  ActivityBufferPool pool(kBytes, 4);
  uint8_t* buffer = pool.Take();
  ASSERT_NE(buffer, nullptr);
  memset(buffer, 0x5a, kBytes);
  pool.Return(buffer);
  uint8_t* again = pool.Take();
  ASSERT_EQ(again, buffer);
  EXPECT_EQ(again[0], 0x5a);  // CUPTI zeroes it itself in this mode
  EXPECT_EQ(again[kBytes - 1], 0x5a);
  pool.Return(again);
}

TEST(ActivityBufferPoolTest, TurningZeroedModeOnClearsIdleBuffers) {
  ActivityBufferPool pool(kBytes, 4);
  uint8_t* buffer = pool.Take();
  ASSERT_NE(buffer, nullptr);
  memset(buffer, 0x11, kBytes);
  pool.Return(buffer);
  pool.SetZeroed(true);
  uint8_t* again = pool.Take();
  ASSERT_EQ(again, buffer);
  EXPECT_TRUE(AllZero(again, kBytes));
  pool.Return(again);
}

TEST(ActivityBufferPoolTest, CapIsCountedAndFreedBuffersMakeRoom) {
  ActivityBufferPool pool(kBytes, 2);
  uint8_t* a = pool.Take();
  uint8_t* b = pool.Take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.Take(), nullptr);
  EXPECT_EQ(pool.Take(), nullptr);
  EXPECT_EQ(pool.refused(), 2u);
  pool.Return(a);
  pool.FreeIdle();
  EXPECT_EQ(pool.allocated(), 1u);
  uint8_t* c = pool.Take();  // the freed slot
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(pool.Take(), nullptr);
  EXPECT_EQ(pool.refused(), 3u);
  pool.Return(b);
  pool.Return(c);
}

// Application threads take buffers while a "parser" returns dirty ones, as
// CUPTI and the shim do: every buffer taken is all zero, and the pool never
// gives one buffer to two holders.
TEST(ActivityBufferPoolTest, ConcurrentTakersOnlyEverSeeZeroBuffers) {
  ActivityBufferPool pool(kBytes, 8);
  pool.SetZeroed(true);
  std::atomic<int> dirty_seen{0}, taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        uint8_t* buffer = pool.Take();
        if (buffer == nullptr) continue;  // all 8 out at the moment
        ++taken;
        if (!AllZero(buffer, kBytes)) ++dirty_seen;
        memset(buffer, 0x40 + t, kBytes);  // a second holder would see this
        std::this_thread::yield();
        if (buffer[kBytes / 2] != 0x40 + t) ++dirty_seen;
        pool.Return(buffer);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(taken.load(), 0);
  EXPECT_EQ(dirty_seen.load(), 0);
  EXPECT_LE(pool.allocated(), 8u);
}

}  // namespace
}  // namespace gpuos_shim
