// DecodeBpfRecord on hand-made records of the kernel side's layouts: a
// batch of mmap/munmap calls becomes one event per call, and a damaged
// batch becomes none; a block I/O request gets the kernel's rwbs string and
// errno; every record kind has one source that decodes and names it.
#include <cstddef>
#include <cstring>
#include <vector>

#include <cerrno>
#include <set>

#include "bpf/block_io.h"
#include "bpf/event_header.h"
#include "bpf/mm.h"
#include "bpf/offcpu.h"
#include "gtest/gtest.h"
#include "record/bpf_session.h"
#include "record/event_decoder.h"
#include "record/sources/bpf_source.h"

namespace gpuos {
namespace {

gpuos_mm_calls_event ThreeCalls() {
  gpuos_mm_calls_event b;
  std::memset(&b, 0, sizeof(b));
  b.hdr = {.ts_ns = 1000, .pid = 40, .tid = 41, .kind = GPUOS_EV_MM_CALLS, .cpu = 1};
  b.count = 3;
  b.calls[0] = {.start_ns = 1000, .duration_ns = 50, .addr = 0, .length = 8192, .result = 0x7f0000,
                .prot = 3, .flags = 0x22, .fd = -1, .is_munmap = 0};
  b.calls[1] = {.start_ns = 1100, .duration_ns = 70, .addr = 0x7f0000, .length = 8192, .result = 0,
                .prot = 0, .flags = 0, .fd = -1, .is_munmap = 1};
  b.calls[2] = {.start_ns = 1300, .duration_ns = 20, .addr = 0, .length = 1ull << 40, .result = -12,
                .prot = 3, .flags = 0x22, .fd = -1, .is_munmap = 0};
  return b;
}

constexpr size_t kCallsOffset = offsetof(gpuos_mm_calls_event, calls);

std::vector<v1::Event> Decode(const void* data, size_t size, DecodeResult* result) {
  std::vector<v1::Event> out;
  v1::Event scratch;
  *result = DecodeBpfRecord(data, size, &scratch, [&out](v1::Event& e) { out.push_back(e); });
  return out;
}

TEST(EventDecoder, ABatchOfMmCallsGivesOneEventPerCallAtItsOwnStart) {
  const gpuos_mm_calls_event b = ThreeCalls();
  DecodeResult result;
  // Sent cut after its last call, as the kernel side does.
  auto events = Decode(&b, kCallsOffset + 3 * sizeof(gpuos_mm_record), &result);
  ASSERT_EQ(result, DecodeResult::kOk);
  ASSERT_EQ(events.size(), 3u);
  for (const v1::Event& e : events) {
    EXPECT_EQ(e.pid(), 40u);
    EXPECT_EQ(e.tid(), 41u);
  }
  ASSERT_TRUE(events[0].has_mmap());
  EXPECT_EQ(events[0].ts_ns(), 1000u);
  EXPECT_EQ(events[0].mmap().duration_ns(), 50u);
  EXPECT_EQ(events[0].mmap().length(), 8192u);
  EXPECT_EQ(events[0].mmap().result(), 0x7f0000);
  EXPECT_EQ(events[0].mmap().prot(), 3u);
  EXPECT_EQ(events[0].mmap().flags(), 0x22u);
  EXPECT_EQ(events[0].mmap().fd(), -1);
  ASSERT_TRUE(events[1].has_munmap());
  EXPECT_EQ(events[1].ts_ns(), 1100u);
  EXPECT_EQ(events[1].munmap().addr(), 0x7f0000u);
  EXPECT_EQ(events[1].munmap().duration_ns(), 70u);
  ASSERT_TRUE(events[2].has_mmap());
  EXPECT_EQ(events[2].ts_ns(), 1300u);
  EXPECT_EQ(events[2].mmap().result(), -12);
  EXPECT_EQ(events[2].mmap().length(), 1ull << 40);
}

TEST(EventDecoder, ADamagedBatchGivesNothing) {
  gpuos_mm_calls_event b = ThreeCalls();
  DecodeResult result;
  // One byte short of its last call.
  EXPECT_TRUE(Decode(&b, kCallsOffset + 3 * sizeof(gpuos_mm_record) - 1, &result).empty());
  EXPECT_EQ(result, DecodeResult::kTooShort);
  // Shorter than its count field.
  EXPECT_TRUE(Decode(&b, kCallsOffset - 1, &result).empty());
  EXPECT_EQ(result, DecodeResult::kTooShort);
  // Counts the kernel side never sends.
  for (uint32_t count : {0u, static_cast<uint32_t>(GPUOS_MM_BATCH) + 1}) {
    b.count = count;
    EXPECT_TRUE(Decode(&b, sizeof(b), &result).empty()) << count;
    EXPECT_EQ(result, DecodeResult::kTooShort) << count;
  }
}

TEST(EventDecoder, AThreadWithoutASlotSendsOneRecordPerCall) {
  gpuos_mm_event e;
  std::memset(&e, 0, sizeof(e));
  e.hdr = {.ts_ns = 5, .pid = 7, .tid = 8, .kind = GPUOS_EV_MUNMAP, .cpu = 0};
  e.call = {.start_ns = 5, .duration_ns = 9, .addr = 0x1000, .length = 4096, .result = 0,
            .prot = 0, .flags = 0, .fd = -1, .is_munmap = 1};
  DecodeResult result;
  auto events = Decode(&e, sizeof(e), &result);
  ASSERT_EQ(result, DecodeResult::kOk);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(events[0].has_munmap());
  EXPECT_EQ(events[0].ts_ns(), 5u);
  EXPECT_EQ(events[0].munmap().length(), 4096u);
  EXPECT_EQ(events[0].munmap().duration_ns(), 9u);
  EXPECT_TRUE(Decode(&e, sizeof(e) - 1, &result).empty());
  EXPECT_EQ(result, DecodeResult::kTooShort);
}

// The waker is a thread of some process, or an interrupt; the agent keeps
// both and whether the kernel side could tell.
TEST(EventDecoder, AnOffCpuRecordKeepsItsWaker) {
  gpuos_off_cpu_event e;
  std::memset(&e, 0, sizeof(e));
  e.hdr = {.ts_ns = 500, .pid = 40, .tid = 41, .kind = GPUOS_EV_OFF_CPU, .cpu = 0};
  e.duration_ns = 100;
  e.runqueue_ns = 10;
  e.syscall_nr = 202;
  e.cause = GPUOS_OFFCPU_FUTEX;
  e.voluntary = 1;
  e.woken_by_tid = 77;
  e.waker_pid = 70;
  e.waker_flags = GPUOS_WAKER_CONTEXT_KNOWN | GPUOS_WAKER_SEEN;
  DecodeResult result;
  auto events = Decode(&e, sizeof(e), &result);
  ASSERT_EQ(result, DecodeResult::kOk);
  ASSERT_EQ(events.size(), 1u);
  const v1::OffCpu& off = events[0].off_cpu();
  EXPECT_EQ(off.woken_by_tid(), 77u);
  EXPECT_EQ(off.waker_pid(), 70u);
  EXPECT_FALSE(off.woken_from_interrupt());
  EXPECT_TRUE(off.waker_context_known());

  e.woken_by_tid = 0;
  e.waker_pid = 0;
  e.waker_flags = GPUOS_WAKER_CONTEXT_KNOWN | GPUOS_WAKER_INTERRUPT | GPUOS_WAKER_SEEN;
  events = Decode(&e, sizeof(e), &result);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].off_cpu().woken_from_interrupt());
  EXPECT_EQ(events[0].off_cpu().woken_by_tid(), 0u);
  EXPECT_FALSE(events[0].off_cpu().switch_in_unseen());
  EXPECT_FALSE(events[0].off_cpu().end_seen_running());
  EXPECT_FALSE(events[0].off_cpu().end_from_run_time());

  // An untraced switch-in, and how its end is known.
  e.end_how = GPUOS_END_SEEN_RUNNING;
  events = Decode(&e, sizeof(e), &result);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].off_cpu().switch_in_unseen());
  EXPECT_TRUE(events[0].off_cpu().end_seen_running());
  EXPECT_FALSE(events[0].off_cpu().end_from_run_time());
  e.end_how = GPUOS_END_RUN_TIME;
  events = Decode(&e, sizeof(e), &result);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].off_cpu().switch_in_unseen());
  EXPECT_FALSE(events[0].off_cpu().end_seen_running());
  EXPECT_TRUE(events[0].off_cpu().end_from_run_time());
}

gpuos_block_io_event BlockIoRecord(uint32_t op, uint32_t flags, uint32_t status) {
  gpuos_block_io_event b;
  std::memset(&b, 0, sizeof(b));
  b.hdr = {.ts_ns = 5000, .pid = 70, .tid = 71, .kind = GPUOS_EV_BLOCK_IO, .cpu = 0};
  b.duration_ns = 250000;
  b.sector = 123456;
  b.bytes = 65536;
  b.dev = (253u << 20) | 0;
  b.op = op;
  b.flags = flags;
  b.status = status;
  return b;
}

TEST(EventDecoder, ABlockIoRequestGetsTheKernelsRwbsAndErrno) {
  struct Case {
    uint32_t op, flags, status;
    const char* rwbs;
    int32_t error;
  };
  for (const Case& c : {Case{0, 0, 0, "R", 0}, Case{1, GPUOS_BLOCK_SYNC, 0, "WS", 0},
                        Case{1, GPUOS_BLOCK_PREFLUSH | GPUOS_BLOCK_FUA | GPUOS_BLOCK_SYNC, 0,
                             "FWFS", 0},
                        Case{0, GPUOS_BLOCK_RAHEAD | GPUOS_BLOCK_META, 3, "RAM", -ENOSPC},
                        Case{2, 0, 200, "F", -EIO}, Case{3, 0, 0, "D", 0},
                        Case{9, 0, 0, "N", 0}}) {
    const gpuos_block_io_event b = BlockIoRecord(c.op, c.flags, c.status);
    DecodeResult result;
    auto events = Decode(&b, sizeof(b), &result);
    ASSERT_EQ(result, DecodeResult::kOk);
    ASSERT_EQ(events.size(), 1u);
    const v1::Event& e = events[0];
    EXPECT_EQ(e.ts_ns(), 5000u);
    EXPECT_EQ(e.pid(), 70u);
    EXPECT_EQ(e.tid(), 71u);
    ASSERT_TRUE(e.has_block_io());
    EXPECT_EQ(e.block_io().rwbs(), c.rwbs);
    EXPECT_EQ(e.block_io().error(), c.error);
    EXPECT_EQ(e.block_io().duration_ns(), 250000u);
    EXPECT_EQ(e.block_io().sector(), 123456u);
    EXPECT_EQ(e.block_io().bytes(), 65536u);
    EXPECT_EQ(e.block_io().dev(), 253u << 20);
  }
  const gpuos_block_io_event b = BlockIoRecord(1, 0, 0);
  DecodeResult result;
  EXPECT_TRUE(Decode(&b, sizeof(b) - 1, &result).empty());
  EXPECT_EQ(result, DecodeResult::kTooShort);
}

TEST(EventDecoder, EveryRecordKindHasOneSourceThatDecodesAndNamesIt) {
  std::set<uint32_t> kinds;
  for (const BpfSourceModule* module : BpfSourceModules()) {
    for (const BpfRecordKind& kind : module->kinds) {
      EXPECT_TRUE(kinds.insert(kind.kind).second) << "kind " << kind.kind << " listed twice";
      EXPECT_STRNE(EventKindName(kind.kind), "unknown");
      EXPECT_NE(kind.decode, nullptr);
    }
  }
  for (uint32_t kind = GPUOS_EV_PROCESS_START; kind < GPUOS_EV_KIND_COUNT; ++kind) {
    EXPECT_TRUE(kinds.count(kind)) << "no source decodes record kind " << kind;
  }
  gpuos_event_header unknown = {.ts_ns = 1, .pid = 1, .tid = 1, .kind = GPUOS_EV_KIND_COUNT,
                                .cpu = 0};
  DecodeResult result;
  EXPECT_TRUE(Decode(&unknown, sizeof(unknown), &result).empty());
  EXPECT_EQ(result, DecodeResult::kUnknownKind);
}

}  // namespace
}  // namespace gpuos
