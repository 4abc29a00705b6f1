// The per-step breakdown and GPU-idle attribution, checked to the ns: a
// hand-built step whose every part was worked out on paper (also shuffled,
// and also written to a real .gpuos file and read back), and randomized
// steps checked against a brute-force model that classifies every
// nanosecond on its own.
#include "analysis/step_breakdown.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "analysis/cuda_api_class.h"
#include "analysis/step_analysis.h"
#include "gtest/gtest.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint32_t kPid = 10;
constexpr uint32_t kTid = 10;
constexpr int32_t kMunmapNr = 11;
constexpr int32_t kMmapNr = 9;
constexpr int32_t kReadNr = 0;

v1::Event Ev(uint64_t ts, uint32_t pid = kPid, uint32_t tid = kTid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

v1::Event Range(uint64_t start, uint64_t end, const std::string& name, uint32_t tid = kTid) {
  v1::Event e = Ev(start, kPid, tid);
  e.mutable_nvtx_range()->set_duration_ns(end - start);
  e.mutable_nvtx_range()->set_name(name);
  return e;
}

v1::Event Api(uint64_t start, uint64_t end, const std::string& name, uint32_t correlation = 0, uint32_t tid = kTid) {
  v1::Event e = Ev(start, kPid, tid);
  e.mutable_cuda_api()->set_duration_ns(end - start);
  e.mutable_cuda_api()->set_name(name);
  e.mutable_cuda_api()->set_correlation_id(correlation);
  return e;
}

v1::Event OffCpu(uint64_t start, uint64_t end, v1::OffCpuCause cause, uint64_t runqueue = 0,
                 int32_t syscall_nr = -1, uint32_t pid = kPid, uint32_t tid = kTid) {
  v1::Event e = Ev(start, pid, tid);
  v1::OffCpu* off = e.mutable_off_cpu();
  off->set_duration_ns(end - start);
  off->set_runqueue_ns(runqueue);
  off->set_cause(cause);
  off->set_syscall_nr(syscall_nr);
  off->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
  return e;
}

v1::Event Munmap(uint64_t start, uint64_t end, uint64_t length) {
  v1::Event e = Ev(start);
  e.mutable_munmap()->set_duration_ns(end - start);
  e.mutable_munmap()->set_length(length);
  return e;
}

v1::Event Mmap(uint64_t start, uint64_t end, uint64_t length) {
  v1::Event e = Ev(start);
  e.mutable_mmap()->set_duration_ns(end - start);
  e.mutable_mmap()->set_length(length);
  return e;
}

v1::Event Kernel(uint64_t start, uint64_t end, uint32_t stream, uint32_t correlation = 0, uint32_t pid = kPid,
                 const std::string& name = "k") {
  v1::Event e = Ev(start, pid, 0);
  e.mutable_gpu_kernel()->set_duration_ns(end - start);
  e.mutable_gpu_kernel()->set_name(name);
  e.mutable_gpu_kernel()->set_stream(stream);
  e.mutable_gpu_kernel()->set_correlation_id(correlation);
  return e;
}

v1::Event Copy(uint64_t start, uint64_t end, v1::MemcpyDirection direction, v1::MemoryKind src, v1::MemoryKind dst,
               uint32_t stream, uint32_t correlation, uint64_t bytes) {
  v1::Event e = Ev(start, kPid, 0);
  v1::GpuMemcpy* m = e.mutable_gpu_memcpy();
  m->set_duration_ns(end - start);
  m->set_direction(direction);
  m->set_src_kind(src);
  m->set_dst_kind(dst);
  m->set_stream(stream);
  m->set_correlation_id(correlation);
  m->set_bytes(bytes);
  return e;
}

v1::Event Memset(uint64_t start, uint64_t end, uint32_t stream, uint64_t bytes) {
  v1::Event e = Ev(start, kPid, 0);
  e.mutable_gpu_memset()->set_duration_ns(end - start);
  e.mutable_gpu_memset()->set_stream(stream);
  e.mutable_gpu_memset()->set_bytes(bytes);
  return e;
}

v1::Event Faults(uint64_t first, uint64_t last, uint32_t count, uint32_t major) {
  v1::Event e = Ev(first);
  e.mutable_page_faults()->set_last_ns(last);
  e.mutable_page_faults()->set_count(count);
  e.mutable_page_faults()->set_major(major);
  return e;
}

v1::Event ProcessStart(uint32_t pid, uint32_t ppid) {
  v1::Event e = Ev(0, pid, pid);
  e.mutable_process_start()->set_ppid(ppid);
  e.mutable_process_start()->set_comm("python");
  return e;
}

v1::TraceHeader Header() {
  v1::TraceHeader h;
  h.set_format_version(1);
  (*h.mutable_syscall_names())[kMunmapNr] = "munmap";
  (*h.mutable_syscall_names())[kMmapNr] = "mmap";
  (*h.mutable_syscall_names())[kReadNr] = "read";
  return h;
}

size_t Cause(IdleCause c) { return static_cast<size_t>(c); }
size_t St(Stage s) { return static_cast<size_t>(s); }

// Step 0 [0, 1000) is empty (warmup); step 1 [1000, 2000) holds the worked
// example.  Times in the comments are absolute ns.
std::vector<v1::Event> WorkedExample() {
  using v1::MEMCPY_HTOD;
  using v1::MEMORY_DEVICE;
  using v1::MEMORY_PAGEABLE;
  using v1::MEMORY_PINNED;
  return {
      ProcessStart(kPid, 1),
      ProcessStart(30, kPid),  // a DataLoader worker
      Range(0, 1000, "step 0"),
      Range(1000, 2000, "step 1"),
      // get batch [1000,1300): blocked in futex [1050,1230) + run queue to 1250;
      // a pinning call (cudaHostRegister) [1260,1280) inside it.
      Range(1000, 1300, "get batch"),
      OffCpu(1050, 1250, v1::OFF_CPU_CAUSE_FUTEX, 20),
      Api(1260, 1280, "cudaHostRegister_v4000"),
      // Synchronous pageable copy: API [1300,1400), GPU [1320,1380) on stream 7;
      // the thread blocks in an ioctl [1340,1360) inside it.
      Api(1300, 1400, "cudaMemcpy_v3020", 7),
      Copy(1320, 1380, MEMCPY_HTOD, MEMORY_PAGEABLE, MEMORY_DEVICE, 7, 7, 4096),
      OffCpu(1340, 1360, v1::OFF_CPU_CAUSE_SYSCALL, 0, 16),
      // munmap [1400,1450), blocked in it [1410,1425) + run queue to 1430.
      Munmap(1400, 1450, 8192),
      OffCpu(1410, 1430, v1::OFF_CPU_CAUSE_SYSCALL, 5, kMunmapNr),
      // Two launches (runtime, then driver) and their kernels on stream 7.
      Api(1450, 1470, "cudaLaunchKernel_v7000", 8),
      Kernel(1480, 1600, 7, 8),
      Api(1470, 1480, "cuLaunchKernel", 9),
      Kernel(1600, 1650, 7, 9),
      // Preempted [1500,1530), then a page fault [1530,1540): under a kernel.
      OffCpu(1500, 1530, v1::OFF_CPU_CAUSE_PREEMPTED, 30),
      OffCpu(1530, 1540, v1::OFF_CPU_CAUSE_PAGE_FAULT),
      Faults(1535, 1538, 3, 1),
      // Async pinned copy on stream 8 [1560,1620), under the kernels.
      Api(1540, 1550, "cudaMemcpyAsync_v3020", 10),
      Copy(1560, 1620, MEMCPY_HTOD, MEMORY_PINNED, MEMORY_DEVICE, 8, 10, 1 << 20),
      // Synchronize [1550,1700), asleep in futex [1560,1690) inside it.
      Api(1550, 1700, "cudaStreamSynchronize_v3020", 11),
      OffCpu(1560, 1690, v1::OFF_CPU_CAUSE_FUTEX),
      // mmap [1700,1720); a lock wait [1720,1760); a blocking read [1760,1780).
      Mmap(1700, 1720, 4096),
      OffCpu(1720, 1760, v1::OFF_CPU_CAUSE_FUTEX),
      OffCpu(1760, 1780, v1::OFF_CPU_CAUSE_SYSCALL, 0, kReadNr),
      // A second data fetch [1800,1900), on the CPU throughout.
      Range(1800, 1900, "DataLoader fetch"),
      Range(1800, 1850, "forward"),  // not a data range
      // A memset [1900,1920); a launch [1930,1945) whose kernel [1950,2100)
      // runs past the end of the step.
      Memset(1900, 1920, 7, 100),
      Api(1930, 1945, "cudaLaunchKernel_v7000", 12),
      Kernel(1950, 2100, 7, 12),
      // Not the launching thread or process: no part of the partitions.
      Kernel(1700, 1800, 1, 99, /*pid=*/20),
      Api(1700, 1800, "cudaLaunchKernel_v7000", 13, /*tid=*/11),
      Range(1000, 1100, "get batch", /*tid=*/11),
      // Context switches of the other roles.
      OffCpu(1100, 1150, v1::OFF_CPU_CAUSE_PREEMPTED, 7, -1, kPid, 11),
      OffCpu(1200, 1300, v1::OFF_CPU_CAUSE_FUTEX, 3, -1, 30, 30),
      OffCpu(2500, 2600, v1::OFF_CPU_CAUSE_FUTEX, 3, -1, 30, 30),  // after the last step
  };
}

void ExpectWorkedExample(const StepAnalysis& a) {
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_EQ(a.pid, kPid);
  EXPECT_EQ(a.tid, kTid);
  EXPECT_EQ(a.worker_processes, 1u);

  const StepRecord& w = a.steps[0];
  EXPECT_TRUE(w.warmup);
  EXPECT_EQ(w.index, 0u);
  EXPECT_EQ(w.cpu.other_ns, 1000u);
  EXPECT_EQ(w.cpu.total(), 1000u);
  EXPECT_EQ(w.gpu.idle_ns, 1000u);
  EXPECT_EQ(w.gpu.idle_stretches, 1u);
  EXPECT_EQ(w.gpu_idle[Cause(IdleCause::kOtherCpu)], 1000u);
  EXPECT_EQ(w.stages[St(Stage::kOther)], 1000u);

  const StepRecord& s = a.steps[1];
  EXPECT_FALSE(s.warmup);
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.start_ns, 1000u);
  EXPECT_EQ(s.end_ns, 2000u);

  // CPU partition.
  EXPECT_EQ(s.cpu.sync_ns, 150u);
  EXPECT_EQ(s.cpu.copy_api_ns, 110u);
  EXPECT_EQ(s.cpu.launch_api_ns, 45u);
  EXPECT_EQ(s.cpu.other_cuda_api_ns, 20u);
  EXPECT_EQ(s.cpu.data_wait_ns, 380u);
  EXPECT_EQ(s.cpu.other_ns, 295u);
  EXPECT_EQ(s.cpu.total(), s.duration_ns());

  // Off-CPU by cause.
  EXPECT_EQ(s.off_cpu.futex_ns, 350u);
  EXPECT_EQ(s.off_cpu.runqueue_ns, 20u);
  EXPECT_EQ(s.off_cpu.syscall_ns, 40u);
  EXPECT_EQ(s.off_cpu.mmap_munmap_ns, 20u);
  EXPECT_EQ(s.off_cpu.preempted_ns, 30u);
  EXPECT_EQ(s.off_cpu.page_fault_ns, 10u);
  EXPECT_EQ(s.off_cpu.unknown_ns, 0u);
  EXPECT_EQ(s.off_cpu.total(), 470u);

  // GPU partition and sums.
  EXPECT_EQ(s.gpu.kernel_busy_ns, 220u);
  EXPECT_EQ(s.gpu.copy_only_ns, 60u);
  EXPECT_EQ(s.gpu.memset_only_ns, 20u);
  EXPECT_EQ(s.gpu.idle_ns, 700u);
  EXPECT_EQ(s.gpu.total(), s.duration_ns());
  EXPECT_EQ(s.gpu.kernel_ns, 220u);
  EXPECT_EQ(s.gpu.memcpy_ns, 120u);
  EXPECT_EQ(s.gpu.memset_ns, 20u);
  EXPECT_EQ(s.gpu.copy_overlap_ns, 60u);
  EXPECT_EQ(s.gpu.htod_ns, 120u);
  EXPECT_EQ(s.gpu.htod_on_kernel_stream_ns, 60u);
  EXPECT_EQ(s.gpu.kernels_started, 3u);
  EXPECT_EQ(s.gpu.kernels_started_ns, 320u);
  EXPECT_EQ(s.gpu.idle_stretches, 4u);
  EXPECT_EQ(s.gpu.longest_idle_ns, 320u);
  ASSERT_EQ(s.gpu.memcpy.size(), 2u);
  for (const MemcpyPart& m : s.gpu.memcpy) {
    EXPECT_EQ(m.direction, v1::MEMCPY_HTOD);
    EXPECT_EQ(m.count, 1u);
    EXPECT_EQ(m.ns, 60u);
    EXPECT_EQ(m.bytes, m.src_kind == v1::MEMORY_PAGEABLE ? 4096u : 1u << 20);
  }

  // GPU idle by cause.
  const IdleByCause& g = s.gpu_idle;
  EXPECT_EQ(g[Cause(IdleCause::kDataWaitRunning)], 180u);
  EXPECT_EQ(g[Cause(IdleCause::kDataWaitFutex)], 180u);
  EXPECT_EQ(g[Cause(IdleCause::kDataWaitBlocked)], 0u);
  EXPECT_EQ(g[Cause(IdleCause::kPreemptedRunqueue)], 20u);
  EXPECT_EQ(g[Cause(IdleCause::kOtherCudaApi)], 20u);
  EXPECT_EQ(g[Cause(IdleCause::kPageableMemcpy)], 40u);
  EXPECT_EQ(g[Cause(IdleCause::kCopyOther)], 0u);
  EXPECT_EQ(g[Cause(IdleCause::kMunmap)], 50u);
  EXPECT_EQ(g[Cause(IdleCause::kLaunching)], 45u);
  EXPECT_EQ(g[Cause(IdleCause::kSynchronizing)], 50u);
  EXPECT_EQ(g[Cause(IdleCause::kMmap)], 20u);
  EXPECT_EQ(g[Cause(IdleCause::kFutexOther)], 40u);
  EXPECT_EQ(g[Cause(IdleCause::kOtherSyscalls)], 20u);
  EXPECT_EQ(g[Cause(IdleCause::kPageFaults)], 0u);
  EXPECT_EQ(g[Cause(IdleCause::kOtherCpu)], 35u);
  uint64_t idle_sum = 0;
  for (uint64_t v : g) idle_sum += v;
  EXPECT_EQ(idle_sum, s.gpu.idle_ns);

  // Stages.
  EXPECT_EQ(s.stages[St(Stage::kGpuCompute)], 240u);
  EXPECT_EQ(s.stages[St(Stage::kTransfer)], 100u);
  EXPECT_EQ(s.stages[St(Stage::kDataLoading)], 360u);
  EXPECT_EQ(s.stages[St(Stage::kDispatch)], 45u);
  // The futex wait no traced thread ended (40) is not the kernel's cost:
  // "other", not OS overhead.
  EXPECT_EQ(s.stages[St(Stage::kOsOverhead)], 110u);
  EXPECT_EQ(s.stages[St(Stage::kOther)], 145u);
  EXPECT_EQ(s.exposed_pageable_copy_ns, 100u);
  EXPECT_EQ(s.exposed_mm_ns, 70u);

  // Counts and OS costs.
  EXPECT_EQ(s.api.launch, 3u);
  EXPECT_EQ(s.api.memcpy, 2u);
  EXPECT_EQ(s.api.pageable_memcpy, 1u);
  EXPECT_EQ(s.api.sync, 1u);
  EXPECT_EQ(s.os.munmap.calls, 1u);
  EXPECT_EQ(s.os.munmap.bytes, 8192u);
  EXPECT_EQ(s.os.munmap.ns, 50u);
  EXPECT_EQ(s.os.mmap.calls, 1u);
  EXPECT_EQ(s.os.mmap.bytes, 4096u);
  EXPECT_EQ(s.os.mmap.ns, 20u);
  EXPECT_EQ(s.os.page_faults, 3u);
  EXPECT_EQ(s.os.major_faults, 1u);
  EXPECT_EQ(s.os.launching.voluntary, 7u);
  EXPECT_EQ(s.os.launching.involuntary, 1u);
  EXPECT_EQ(s.os.launching.runqueue_ns, 55u);
  EXPECT_EQ(s.os.others.involuntary, 1u);
  EXPECT_EQ(s.os.others.voluntary, 0u);
  EXPECT_EQ(s.os.others.runqueue_ns, 7u);
  EXPECT_EQ(s.os.workers.voluntary, 1u);
  EXPECT_EQ(s.os.workers.runqueue_ns, 3u);

  // The summary is step 1 alone.
  EXPECT_EQ(a.measured_steps, 1u);
  EXPECT_EQ(a.measured_wall_ns, 1000u);
  EXPECT_EQ(a.measured_total.gpu.idle_ns, 700u);
  EXPECT_EQ(a.measured_total.gpu_idle[Cause(IdleCause::kMunmap)], 50u);
  EXPECT_DOUBLE_EQ(a.stage_share[St(Stage::kDataLoading)].mean, 0.36);
  EXPECT_DOUBLE_EQ(a.stage_share[St(Stage::kGpuCompute)].p95, 0.24);
}

TEST(StepBreakdownTest, WorkedExampleToTheNanosecond) {
  auto a = AnalyzeStepEvents(Header(), WorkedExample(), StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectWorkedExample(*a);
}

TEST(StepBreakdownTest, EventOrderDoesNotMatter) {
  std::vector<v1::Event> events = WorkedExample();
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(events.begin(), events.end(), rng);
    auto a = AnalyzeStepEvents(Header(), events, StepOptions());
    ASSERT_TRUE(a.ok()) << a.status();
    ExpectWorkedExample(*a);
  }
}

TEST(StepBreakdownTest, ReadsARealTraceFile) {
  char dir_template[] = "/tmp/gpuos_step_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/trace.gpuos";
  {
    TraceWriter::Options options;
    options.max_batch_events = 7;  // several batches
    auto writer = TraceWriter::Create(path, options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->WriteHeader(Header()).ok());
    for (const v1::Event& e : WorkedExample()) ASSERT_TRUE((*writer)->Append(e).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto a = AnalyzeSteps(path, StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->read_error.empty()) << a->read_error;
  ExpectWorkedExample(*a);

  // A truncated file: what was readable is analyzed and the damage named.
  ASSERT_EQ(truncate(path.c_str(), 200), 0);
  a = AnalyzeSteps(path, StepOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->read_error.empty());

  EXPECT_FALSE(AnalyzeSteps(std::string(dir_template) + "/missing.gpuos", StepOptions()).ok());
  unlink(path.c_str());
  rmdir(dir_template);
}

TEST(StepBreakdownTest, WithoutSyscallNamesABlockedMunmapStillCountsThroughItsCall) {
  // No syscall table: the off-CPU interval inside munmap is still inside the
  // MunmapCall span, so it is munmap time; with neither, it is a syscall.
  std::vector<v1::Event> events = {Range(0, 100, "step 0"), Munmap(10, 40, 4096),
                                   OffCpu(20, 30, v1::OFF_CPU_CAUSE_SYSCALL, 0, kMunmapNr),
                                   OffCpu(60, 70, v1::OFF_CPU_CAUSE_SYSCALL, 0, kMunmapNr)};
  StepOptions options;
  options.warmup_steps = 0;
  auto a = AnalyzeStepEvents(v1::TraceHeader(), events, options);
  ASSERT_TRUE(a.ok());
  const StepRecord& s = a->steps[0];
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kMunmap)], 30u);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kOtherSyscalls)], 10u);
  EXPECT_EQ(s.off_cpu.mmap_munmap_ns, 10u);
  EXPECT_EQ(s.off_cpu.syscall_ns, 10u);

  // With the table, the second one is munmap time too.
  a = AnalyzeStepEvents(Header(), events, options);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->steps[0].gpu_idle[Cause(IdleCause::kMunmap)], 40u);
  EXPECT_EQ(a->steps[0].off_cpu.mmap_munmap_ns, 20u);
}

// A rank's DDP step: the gradients' all-reduce overlaps the backward pass's
// last kernels, then the GPU waits in it for the other rank.  The overlap is
// compute, the wait communication: neither compute nor idle, and not a
// 200 ns kernel that says the work is long.
TEST(StepBreakdownTest, ACollectivesKernelAloneIsCommunicationNotComputeNorIdle) {
  const std::string nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  std::vector<v1::Event> events = {Range(0, 400, "step 0"),
                                   Kernel(10, 60, 1),
                                   Kernel(60, 110, 1),
                                   Kernel(90, 290, 7, 0, kPid, nccl),
                                   Copy(200, 240, v1::MEMCPY_HTOD, v1::MEMORY_PINNED, v1::MEMORY_DEVICE, 3, 5, 64),
                                   Kernel(300, 340, 1),
                                   Memset(350, 360, 1, 8)};
  StepOptions options;
  options.warmup_steps = 0;
  auto a = AnalyzeStepEvents(Header(), events, options);
  ASSERT_TRUE(a.ok()) << a.status();
  const StepRecord& s = a->steps[0];
  EXPECT_EQ(s.gpu.kernel_busy_ns, 140u);  // 10-110 and 300-340
  EXPECT_EQ(s.gpu.comm_only_ns, 180u);    // 110-290, the copy beside it included
  EXPECT_EQ(s.gpu.copy_only_ns, 0u);
  EXPECT_EQ(s.gpu.copy_overlap_ns, 40u);
  EXPECT_EQ(s.gpu.memset_only_ns, 10u);
  EXPECT_EQ(s.gpu.idle_ns, 70u);  // 0-10, 290-300, 340-350, 360-400
  EXPECT_EQ(s.gpu.total(), 400u);
  EXPECT_EQ(s.gpu.kernel_ns, 340u);
  EXPECT_EQ(s.gpu.comm_kernel_ns, 200u);
  EXPECT_EQ(s.gpu.kernels_started, 4u);
  EXPECT_EQ(s.gpu.comm_kernels_started, 1u);
  EXPECT_EQ(s.gpu.compute_kernels_started(), 3u);
  EXPECT_EQ(s.gpu.compute_kernels_started_ns(), 140u);
  EXPECT_EQ(s.stages[static_cast<size_t>(Stage::kGpuCompute)], 150u);
  EXPECT_EQ(s.stages[static_cast<size_t>(Stage::kCommunication)], 180u);
  EXPECT_EQ(s.stages[static_cast<size_t>(Stage::kTransfer)], 0u);
}

// Running code between CUDA calls is the framework's dispatch ("other CPU
// work") while the calls come within kHostWorkGapNs of each other, or when
// a longer stretch ends in a launch (the framework's Python between
// kernels); a longer stretch that ends in a copy to the device is the job
// making data for the GPU ("host work"), except where the thread was off
// the CPU in it.  The copy is told by the driver call's name or by its GPU
// record; a stretch at a step's end, by the thread's next call.  A step with
// no CUDA call recorded has no host work: there the trace cannot tell.
TEST(StepBreakdownTest, RunningFarFromCudaCallsBeforeACopyToTheDeviceIsTheJobsOwnCpuWork) {
  constexpr uint64_t kUs = 1'000;
  ASSERT_EQ(kHostWorkGapNs, 200 * kUs);
  const std::vector<v1::Event> events = {
      Range(0, 1000 * kUs, "step 0"),
      Range(1000 * kUs, 2000 * kUs, "step 1"),
      Range(2000 * kUs, 3000 * kUs, "step 2"),
      Api(10 * kUs, 20 * kUs, "cudaLaunchKernel_v7000", 1),
      Api(170 * kUs, 180 * kUs, "cudaLaunchKernel_v7000", 2),  // 150 us after the last: dispatch
      OffCpu(300 * kUs, 350 * kUs, v1::OFF_CPU_CAUSE_FUTEX),  // inside the 420 us stretch
      Api(600 * kUs, 610 * kUs, "cuMemcpyHtoDAsync_v2", 0),    // the driver's call names its direction
      // 390 us to the step's end, then 300 us into step 1 before a runtime
      // copy that its GPU record says goes to the device.
      Api(1300 * kUs, 1310 * kUs, "cudaMemcpyAsync_v3020", 4),
      Copy(1305 * kUs, 1306 * kUs, v1::MEMCPY_HTOD, v1::MEMORY_PINNED, v1::MEMORY_DEVICE, 7, 4, 64),
      Api(1400 * kUs, 1410 * kUs, "cudaLaunchKernel_v7000", 5),
      Api(1700 * kUs, 1710 * kUs, "cudaLaunchKernel_v7000", 6),  // 290 us after a launch: the framework's
      // 290 us to the step's end and no call after; step 2 has no CUDA call at all.
  };
  StepOptions options;
  options.warmup_steps = 0;
  auto a = AnalyzeStepEvents(Header(), events, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->steps.size(), 3u);
  const StepRecord& s = a->steps[0];
  EXPECT_EQ(s.gpu.idle_ns, 1000 * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kLaunching)], 20 * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kCopyOther)], 10 * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kOtherCpu)], (10 + 150) * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kHostWork)], (420 - 50 + 390) * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kFutexOther)], 50 * kUs);
  const StepRecord& copy = a->steps[1];
  EXPECT_EQ(copy.gpu.idle_ns, 999 * kUs);
  EXPECT_EQ(copy.gpu_idle[Cause(IdleCause::kHostWork)], 300 * kUs);
  EXPECT_EQ(copy.gpu_idle[Cause(IdleCause::kOtherCpu)], (90 + 290 + 290) * kUs);
  const StepRecord& none = a->steps[2];
  EXPECT_EQ(none.gpu_idle[Cause(IdleCause::kHostWork)], 0u);
  EXPECT_EQ(none.gpu_idle[Cause(IdleCause::kOtherCpu)], 1000 * kUs);
}

// A value read back mid-step (nonzero, .item()): the thread waits in a sync
// until the GPU's queue runs dry, and the GPU sits idle from then until the
// next kernel the thread launches.
TEST(StepBreakdownTest, SyncsBetweenLaunchesAndTheIdleThatFollowsThem) {
  constexpr uint64_t kUs = 1'000;
  const std::vector<v1::Event> events = {
      Range(0, 1000 * kUs, "step 0"),
      Api(10 * kUs, 20 * kUs, "cudaLaunchKernel_v7000", 1),
      Kernel(20 * kUs, 300 * kUs, 7, 1),
      Api(30 * kUs, 40 * kUs, "cudaMemcpyAsync_v3020", 2),
      // The runtime's sync and the driver's inside it: one sync, during
      // which the kernel ends (300 us).
      Api(40 * kUs, 305 * kUs, "cudaStreamSynchronize_v3020", 3),
      Api(41 * kUs, 304 * kUs, "cuStreamSynchronize", 4),
      Api(350 * kUs, 360 * kUs, "cudaLaunchKernel_v7000", 5),
      Kernel(380 * kUs, 500 * kUs, 7, 5),
      // A sync after a launch, and a second with no launch since: only the
      // first drained work.
      Api(510 * kUs, 520 * kUs, "cudaStreamSynchronize_v3020", 6),
      Api(530 * kUs, 540 * kUs, "cudaDeviceSynchronize_v3020", 7),
      Api(600 * kUs, 610 * kUs, "cudaLaunchKernel_v7000", 8),
      Kernel(620 * kUs, 700 * kUs, 7, 8),
      // A sync with no launch after it in the step (loss.item() at its end).
      Api(690 * kUs, 900 * kUs, "cudaStreamSynchronize_v3020", 9),
  };
  StepOptions options;
  options.warmup_steps = 0;
  auto a = AnalyzeStepEvents(Header(), events, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->steps.size(), 1u);
  const StepRecord& s = a->steps[0];
  EXPECT_EQ(s.api.sync, 5u);
  EXPECT_EQ(s.api.syncs_between_launches, 2u);
  // Idle stretches: 0-20 (the step's start), 300-380 (began inside the
  // first sync), 500-620, 700-1000 (began inside the last sync).
  EXPECT_EQ(s.gpu.idle_stretches, 4u);
  EXPECT_EQ(s.gpu.idle_stretches_after_sync, 2u);
  EXPECT_EQ(s.gpu.idle_after_sync_ns, (80 + 300) * kUs);
  EXPECT_EQ(s.gpu.idle_ns, (20 + 80 + 120 + 300) * kUs);
}

// torch.cuda.empty_cache() every step: the caching allocator frees its
// blocks (cudaFree waits for the device, so the GPU's queue runs dry inside
// it) and the next step allocates them again.
TEST(StepBreakdownTest, AllocationCallsAndTheIdleInAndAfterThem) {
  constexpr uint64_t kUs = 1'000;
  const std::vector<v1::Event> events = {
      Range(0, 1000 * kUs, "step 0"),
      // Allocated while the GPU idles from the step's start: only the part
      // inside the call counts (the stretch began before it).
      Api(5 * kUs, 15 * kUs, "cudaMalloc_v3020", 1),
      Api(20 * kUs, 30 * kUs, "cudaLaunchKernel_v7000", 2),
      Kernel(40 * kUs, 300 * kUs, 7, 2),
      // A free that waits for the kernel: the GPU goes idle inside it, and
      // stays idle past it until the next kernel (320-400 in all).  The
      // driver's call nested in the runtime's is one call.
      Api(100 * kUs, 320 * kUs, "cudaFree_v3020", 3),
      Api(101 * kUs, 319 * kUs, "cuMemFree_v2", 4),
      Api(330 * kUs, 350 * kUs, "cudaMalloc_v3020", 5),
      Api(360 * kUs, 370 * kUs, "cudaLaunchKernel_v7000", 6),
      Kernel(400 * kUs, 900 * kUs, 7, 6),
      // Stream-ordered calls are not the allocator going to the driver.
      Api(910 * kUs, 920 * kUs, "cudaFreeAsync_v11020", 7),
  };
  StepOptions options;
  options.warmup_steps = 0;
  auto a = AnalyzeStepEvents(Header(), events, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->steps.size(), 1u);
  const StepRecord& s = a->steps[0];
  EXPECT_EQ(s.api.allocations, 3u);
  EXPECT_EQ(s.cpu.allocate_api_ns, (10 + 220 + 20) * kUs);
  EXPECT_EQ(s.cpu.other_cuda_api_ns, (10 + 220 + 20 + 10) * kUs);
  EXPECT_EQ(s.gpu.idle_stretches_after_allocation, 1u);
  // 5-15 inside the first malloc; 300-400 after the free began draining.
  EXPECT_EQ(s.gpu.idle_allocation_ns, (10 + 100) * kUs);
  EXPECT_EQ(s.gpu_idle[Cause(IdleCause::kAllocating)], (10 + 20 + 20) * kUs);
  EXPECT_EQ(s.gpu.idle_ns, (40 + 100 + 100) * kUs);
}

// ---- Randomized steps against a brute-force model ------------------------

struct Interval {
  uint64_t start;
  uint64_t end;
};

struct Model {
  // Launching-thread facts by kind, and the GPU's.
  std::vector<std::pair<Interval, CudaApiClass>> api;
  std::vector<std::pair<Interval, bool>> api_pageable;  // parallel to api
  std::vector<Interval> data, munmap, mmap, kernels, collectives, copies, memsets;
  struct Off {
    Interval blocked;
    Interval runqueue;
    v1::OffCpuCause cause;
  };
  std::vector<Off> off;
};

bool In(const Interval& i, uint64_t t) { return t >= i.start && t < i.end; }

// What the thread and GPU do at ns t, computed from scratch.
StepRecord BruteForce(const Model& m, uint64_t start, uint64_t end) {
  StepRecord r;
  bool idle_before = false;
  bool after_sync = false;        // the idle stretch open at t began inside a sync call
  bool after_allocation = false;  // ... inside an allocation call
  for (uint64_t t = start; t < end; ++t) {
    ThreadInstant th;
    int best = -1;  // priority: sync > pageable > copy > launch > memset > allocate > other
    auto rank = [](CudaApiClass c, bool pageable) {
      switch (c) {
        case CudaApiClass::kSync: return 6;
        case CudaApiClass::kMemcpy: return pageable ? 5 : 4;
        case CudaApiClass::kLaunch: return 3;
        case CudaApiClass::kMemset: return 2;
        case CudaApiClass::kAllocate: return 1;
        default: return 0;
      }
    };
    for (size_t i = 0; i < m.api.size(); ++i) {
      if (In(m.api[i].first, t)) best = std::max(best, rank(m.api[i].second, m.api_pageable[i].second));
    }
    const ThreadApiState states[] = {ThreadApiState::kOther, ThreadApiState::kAllocate, ThreadApiState::kMemset,
                                     ThreadApiState::kLaunch, ThreadApiState::kCopy, ThreadApiState::kPageableCopy,
                                     ThreadApiState::kSync};
    if (best >= 0) th.api = states[best];
    for (const Interval& i : m.data) th.in_data_range |= In(i, t);
    for (const Interval& i : m.mmap) {
      if (In(i, t)) th.mm = ThreadMmState::kMmap;
    }
    for (const Interval& i : m.munmap) {
      if (In(i, t)) th.mm = ThreadMmState::kMunmap;
    }
    for (const Model::Off& o : m.off) {
      if (In(o.runqueue, t)) {
        th.off_cpu = o.cause == v1::OFF_CPU_CAUSE_PREEMPTED ? ThreadOffCpuState::kPreempted
                                                            : ThreadOffCpuState::kRunqueue;
      } else if (In(o.blocked, t)) {
        th.off_cpu = o.cause == v1::OFF_CPU_CAUSE_FUTEX        ? ThreadOffCpuState::kFutex
                     : o.cause == v1::OFF_CPU_CAUSE_PAGE_FAULT ? ThreadOffCpuState::kPageFault
                     : o.cause == v1::OFF_CPU_CAUSE_SYSCALL    ? ThreadOffCpuState::kSyscall
                                                               : ThreadOffCpuState::kUnknown;
      }
    }
    bool kernel = false, collective = false, copy = false, memset = false;
    for (const Interval& i : m.kernels) kernel |= In(i, t);
    for (const Interval& i : m.collectives) collective |= In(i, t);
    for (const Interval& i : m.copies) copy |= In(i, t);
    for (const Interval& i : m.memsets) memset |= In(i, t);

    switch (th.api) {
      case ThreadApiState::kSync: ++r.cpu.sync_ns; break;
      case ThreadApiState::kCopy:
      case ThreadApiState::kPageableCopy: ++r.cpu.copy_api_ns; break;
      case ThreadApiState::kLaunch: ++r.cpu.launch_api_ns; break;
      case ThreadApiState::kAllocate: ++r.cpu.allocate_api_ns; [[fallthrough]];
      case ThreadApiState::kMemset:
      case ThreadApiState::kOther: ++r.cpu.other_cuda_api_ns; break;
      case ThreadApiState::kNone: ++(th.in_data_range ? r.cpu.data_wait_ns : r.cpu.other_ns); break;
    }
    if (th.off_cpu != ThreadOffCpuState::kOnCpu) {
      if (th.mm != ThreadMmState::kNone) {
        ++r.off_cpu.mmap_munmap_ns;
      } else if (th.off_cpu == ThreadOffCpuState::kFutex) {
        ++r.off_cpu.futex_ns;
      } else if (th.off_cpu == ThreadOffCpuState::kPageFault) {
        ++r.off_cpu.page_fault_ns;
      } else if (th.off_cpu == ThreadOffCpuState::kSyscall) {
        ++r.off_cpu.syscall_ns;
      } else if (th.off_cpu == ThreadOffCpuState::kUnknown) {
        ++r.off_cpu.unknown_ns;
      } else if (th.off_cpu == ThreadOffCpuState::kPreempted) {
        ++r.off_cpu.preempted_ns;
      } else {
        ++r.off_cpu.runqueue_ns;
      }
    }
    if ((kernel || collective) && copy) ++r.gpu.copy_overlap_ns;
    if (kernel) {
      ++r.gpu.kernel_busy_ns;
    } else if (collective) {
      ++r.gpu.comm_only_ns;
    } else if (copy) {
      ++r.gpu.copy_only_ns;
    } else if (memset) {
      ++r.gpu.memset_only_ns;
    } else {
      ++r.gpu.idle_ns;
      const IdleCause cause = AttributeIdleInstant(th);
      ++r.gpu_idle[static_cast<size_t>(cause)];
      if (!idle_before) after_sync = th.api == ThreadApiState::kSync;
      if (after_sync) ++r.gpu.idle_after_sync_ns;
      if (!idle_before) after_allocation = th.api == ThreadApiState::kAllocate;
      if (after_allocation || th.api == ThreadApiState::kAllocate) ++r.gpu.idle_allocation_ns;
    }
    idle_before = !kernel && !collective && !copy && !memset;
    Stage stage = kernel                   ? Stage::kGpuCompute
                  : collective             ? Stage::kCommunication
                  : memset                 ? Stage::kGpuCompute
                  : copy                   ? Stage::kTransfer
                                           : StageOfIdleCause(AttributeIdleInstant(th));
    ++r.stages[static_cast<size_t>(stage)];
  }
  return r;
}

TEST(StepBreakdownTest, RandomizedStepsMatchABruteForceModel) {
  std::mt19937_64 rng(20240605);
  auto uniform = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  const char* api_names[] = {"cudaLaunchKernel_v7000", "cudaStreamSynchronize_v3020", "cudaMemcpy_v3020",
                             "cudaMemcpyAsync_v3020", "cudaMemsetAsync_v3020", "cudaMalloc_v3020",
                             "cuLaunchKernel", "cudaEventRecord_v3020", "cudaFree_v3020"};
  const v1::OffCpuCause causes[] = {v1::OFF_CPU_CAUSE_UNKNOWN, v1::OFF_CPU_CAUSE_PREEMPTED, v1::OFF_CPU_CAUSE_FUTEX,
                                    v1::OFF_CPU_CAUSE_SYSCALL, v1::OFF_CPU_CAUSE_PAGE_FAULT};
  for (int trial = 0; trial < 40; ++trial) {
    Model m;
    std::vector<v1::Event> events;
    // Five steps with gaps between some of them; spans cross boundaries.
    std::vector<Interval> steps;
    uint64_t t = uniform(0, 50);
    for (int i = 0; i < 5; ++i) {
      uint64_t len = uniform(1, 400);
      steps.push_back({t, t + len});
      events.push_back(Range(t, t + len, "step " + std::to_string(i)));
      t += len + (uniform(0, 1) ? uniform(0, 60) : 0);
    }
    const uint64_t horizon = t + 50;
    auto random_interval = [&](uint64_t max_len) {
      uint64_t s = uniform(0, horizon);
      return Interval{s, s + uniform(1, max_len)};
    };
    uint32_t correlation = 1;
    for (int i = 0; i < 30; ++i) {
      Interval in = random_interval(uniform(0, 3) ? 30 : 600);
      const char* name = api_names[uniform(0, 8)];
      const uint32_t corr = correlation++;
      events.push_back(Api(in.start, in.end, name, corr));
      const bool is_copy = ClassifyCudaApi(name) == CudaApiClass::kMemcpy;
      const bool pageable = is_copy && uniform(0, 1);
      m.api.push_back({in, ClassifyCudaApi(name)});
      m.api_pageable.push_back({in, pageable});
      if (is_copy) {
        Interval g = random_interval(80);
        events.push_back(Copy(g.start, g.end, v1::MEMCPY_HTOD, pageable ? v1::MEMORY_PAGEABLE : v1::MEMORY_PINNED,
                              v1::MEMORY_DEVICE, static_cast<uint32_t>(uniform(1, 3)), corr, 64));
        m.copies.push_back(g);
      }
    }
    for (int i = 0; i < 8; ++i) {
      Interval in = random_interval(300);
      events.push_back(Range(in.start, in.end, uniform(0, 1) ? "get batch" : "DataLoader fetch"));
      m.data.push_back(in);
      Interval other = random_interval(300);
      events.push_back(Range(other.start, other.end, "forward"));
    }
    for (int i = 0; i < 4; ++i) {
      Interval in = random_interval(60);
      events.push_back(Munmap(in.start, in.end, 4096));
      m.munmap.push_back(in);
      in = random_interval(60);
      events.push_back(Mmap(in.start, in.end, 4096));
      m.mmap.push_back(in);
    }
    // Off-CPU intervals of one thread never overlap.
    uint64_t cursor = 0;
    while (cursor < horizon) {
      cursor += uniform(1, 80);
      uint64_t len = uniform(1, 120);
      v1::OffCpuCause cause = causes[uniform(0, 4)];
      uint64_t runqueue = cause == v1::OFF_CPU_CAUSE_PREEMPTED ? len : uniform(0, len);
      events.push_back(OffCpu(cursor, cursor + len, cause, runqueue, -1));
      m.off.push_back({{cursor, cursor + len - runqueue}, {cursor + len - runqueue, cursor + len}, cause});
      cursor += len;
    }
    for (int i = 0; i < 25; ++i) {
      Interval in = random_interval(uniform(0, 4) ? 40 : 300);
      events.push_back(Kernel(in.start, in.end, static_cast<uint32_t>(uniform(1, 3))));
      m.kernels.push_back(in);
    }
    for (int i = 0; i < 6; ++i) {
      Interval in = random_interval(uniform(0, 2) ? 60 : 400);
      events.push_back(Kernel(in.start, in.end, 7, 0, kPid, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
      m.collectives.push_back(in);
    }
    for (int i = 0; i < 4; ++i) {
      Interval in = random_interval(40);
      events.push_back(Memset(in.start, in.end, 1, 8));
      m.memsets.push_back(in);
    }
    std::shuffle(events.begin(), events.end(), rng);

    StepOptions options;
    options.warmup_steps = 0;
    auto a = AnalyzeStepEvents(v1::TraceHeader(), events, options);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->steps.size(), steps.size());
    for (size_t k = 0; k < steps.size(); ++k) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " step " + std::to_string(k));
      const StepRecord& got = a->steps[k];
      const StepRecord want = BruteForce(m, steps[k].start, steps[k].end);
      EXPECT_EQ(got.cpu.sync_ns, want.cpu.sync_ns);
      EXPECT_EQ(got.cpu.copy_api_ns, want.cpu.copy_api_ns);
      EXPECT_EQ(got.cpu.launch_api_ns, want.cpu.launch_api_ns);
      EXPECT_EQ(got.cpu.other_cuda_api_ns, want.cpu.other_cuda_api_ns);
      EXPECT_EQ(got.cpu.allocate_api_ns, want.cpu.allocate_api_ns);
      EXPECT_EQ(got.cpu.data_wait_ns, want.cpu.data_wait_ns);
      EXPECT_EQ(got.cpu.other_ns, want.cpu.other_ns);
      EXPECT_EQ(got.cpu.total(), got.duration_ns());
      EXPECT_EQ(got.off_cpu.futex_ns, want.off_cpu.futex_ns);
      EXPECT_EQ(got.off_cpu.page_fault_ns, want.off_cpu.page_fault_ns);
      EXPECT_EQ(got.off_cpu.mmap_munmap_ns, want.off_cpu.mmap_munmap_ns);
      EXPECT_EQ(got.off_cpu.syscall_ns, want.off_cpu.syscall_ns);
      EXPECT_EQ(got.off_cpu.unknown_ns, want.off_cpu.unknown_ns);
      EXPECT_EQ(got.off_cpu.preempted_ns, want.off_cpu.preempted_ns);
      EXPECT_EQ(got.off_cpu.runqueue_ns, want.off_cpu.runqueue_ns);
      EXPECT_EQ(got.gpu.kernel_busy_ns, want.gpu.kernel_busy_ns);
      EXPECT_EQ(got.gpu.comm_only_ns, want.gpu.comm_only_ns);
      EXPECT_EQ(got.gpu.copy_only_ns, want.gpu.copy_only_ns);
      EXPECT_EQ(got.gpu.memset_only_ns, want.gpu.memset_only_ns);
      EXPECT_EQ(got.gpu.idle_ns, want.gpu.idle_ns);
      EXPECT_EQ(got.gpu.idle_after_sync_ns, want.gpu.idle_after_sync_ns);
      EXPECT_EQ(got.gpu.idle_allocation_ns, want.gpu.idle_allocation_ns);
      EXPECT_EQ(got.gpu.copy_overlap_ns, want.gpu.copy_overlap_ns);
      EXPECT_EQ(got.gpu.total(), got.duration_ns());
      for (size_t c = 0; c < kIdleCauseCount; ++c) {
        EXPECT_EQ(got.gpu_idle[c], want.gpu_idle[c]) << IdleCauseName(static_cast<IdleCause>(c));
      }
      uint64_t stage_sum = 0;
      for (size_t i = 0; i < kStageCount; ++i) {
        EXPECT_EQ(got.stages[i], want.stages[i]) << StageName(static_cast<Stage>(i));
        stage_sum += got.stages[i];
      }
      EXPECT_EQ(stage_sum, got.duration_ns());
    }
  }
}

}  // namespace
}  // namespace gpuos
