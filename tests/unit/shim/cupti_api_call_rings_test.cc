// Tests of cupti_shim/cupti_api_call_rings: real threads write while a
// consumer drains, as the CUDA API callbacks and the shim's parser do.
#include "cupti_api_call_rings.h"

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

TimedApiCall Call(uint32_t tid, uint32_t seq) {
  TimedApiCall call;
  call.tid = tid;
  call.correlation_id = seq;
  call.start_ns = 1000 + seq;
  call.end_ns = 2000 + seq;
  return call;
}

// Four threads record 200,000 calls each into 1,024-record rings while the
// consumer drains: nothing is lost, duplicated or reordered within a
// thread, and what was dropped (rings full while the consumer lagged) is
// counted exactly.
TEST(ApiCallRingsTest, ConcurrentWritersLoseNothingUncounted) {
  ApiCallRings rings(1024);
  constexpr uint32_t kThreads = 4;
  constexpr uint32_t kCalls = 200000;
  std::atomic<uint32_t> running{kThreads};
  std::vector<std::thread> writers;
  for (uint32_t t = 1; t <= kThreads; ++t) {
    writers.emplace_back([&rings, &running, t] {
      for (uint32_t i = 1; i <= kCalls; ++i) rings.Record(Call(t, i));
      running.fetch_sub(1);
    });
  }
  std::map<uint32_t, uint32_t> last_seen;
  std::map<uint32_t, uint64_t> received;
  bool in_order = true;
  auto consume = [&](const TimedApiCall& call) {
    in_order = in_order && call.correlation_id > last_seen[call.tid] &&
               call.end_ns - call.start_ns == 1000;
    last_seen[call.tid] = call.correlation_id;
    ++received[call.tid];
  };
  uint64_t dropped = 0;
  while (running.load() > 0) {
    rings.Drain(consume);
    dropped += rings.TakeDropped();
  }
  for (std::thread& w : writers) w.join();
  rings.Drain(consume);
  dropped += rings.TakeDropped();

  EXPECT_TRUE(in_order);
  uint64_t total = 0;
  for (uint32_t t = 1; t <= kThreads; ++t) {
    EXPECT_GT(received[t], 0u) << "thread " << t;
    total += received[t];
  }
  EXPECT_EQ(total + dropped, uint64_t{kThreads} * kCalls);
}

TEST(ApiCallRingsTest, AFullRingDropsAndCounts) {
  ApiCallRings rings(3);  // rounded up to 4
  EXPECT_EQ(rings.records_per_thread(), 4u);
  for (uint32_t i = 1; i <= 10; ++i) rings.Record(Call(1, i));
  std::vector<uint32_t> seen;
  EXPECT_EQ(rings.Drain([&](const TimedApiCall& c) { seen.push_back(c.correlation_id); }), 4u);
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 3, 4}));  // the oldest are kept
  EXPECT_EQ(rings.TakeDropped(), 6u);
  EXPECT_EQ(rings.TakeDropped(), 0u);
  // Drained, the ring takes records again.
  rings.Record(Call(1, 11));
  seen.clear();
  rings.Drain([&](const TimedApiCall& c) { seen.push_back(c.correlation_id); });
  EXPECT_EQ(seen, (std::vector<uint32_t>{11}));
}

// A thread's ring is freed once the thread has exited and the consumer has
// read it to the end; its records are delivered first.
TEST(ApiCallRingsTest, ExitedThreadsRingsAreDrainedThenFreed) {
  ApiCallRings rings(64);
  rings.Record(Call(1, 1));  // this thread's ring stays
  for (uint32_t t = 2; t <= 4; ++t) {
    std::thread([&rings, t] {
      for (uint32_t i = 1; i <= 5; ++i) rings.Record(Call(t, i));
    }).join();
  }
  EXPECT_EQ(rings.ring_count(), 4u);
  std::map<uint32_t, int> received;
  EXPECT_EQ(rings.Drain([&](const TimedApiCall& c) { ++received[c.tid]; }), 16u);
  EXPECT_EQ(received, (std::map<uint32_t, int>{{1, 1}, {2, 5}, {3, 5}, {4, 5}}));
  EXPECT_EQ(rings.ring_count(), 1u);
  rings.Record(Call(1, 2));
  EXPECT_EQ(rings.Drain([](const TimedApiCall&) {}), 1u);
}

// Two instances (a shim detached and attached again creates none, but a
// test may): a thread's records go to the instance it records into.
TEST(ApiCallRingsTest, InstancesKeepTheirOwnRings) {
  ApiCallRings a(8), b(8);
  a.Record(Call(1, 1));
  b.Record(Call(1, 2));
  a.Record(Call(1, 3));
  std::vector<uint32_t> from_a, from_b;
  a.Drain([&](const TimedApiCall& c) { from_a.push_back(c.correlation_id); });
  b.Drain([&](const TimedApiCall& c) { from_b.push_back(c.correlation_id); });
  EXPECT_EQ(from_a, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(from_b, (std::vector<uint32_t>{2}));
}

}  // namespace
}  // namespace gpuos_shim
