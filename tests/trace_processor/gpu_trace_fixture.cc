// Writes a .gpuos trace with the CUDA records a traced PyTorch-style job
// produces on a GPU host, for check_exports.py to export and load in
// Perfetto's trace processor on machines without a GPU.  What the shim and
// CUPTI would deliver, in the order they deliver it: OS events and API calls
// as they happen, GPU records in late batches (a CUPTI buffer per few
// steps), with what real traces have that the exporter must handle:
//  - two launching threads and two streams of one device, and a second
//    device with a peer copy;
//  - kernels, async copies, memsets and stream/context syncs, each with the
//    API call of its correlation id; runtime names with their _vNNNN tag;
//  - a graph launch: one API call, two kernels running at once on one
//    stream (they cannot nest: overflow lanes);
//  - work without its API call (correlation 0) and calls without work;
//  - a kernel that runs past its step's end into the next one, and another
//    process's kernels on the same GPU (not the steps' process);
//  - NVTX step ranges (push/pop) with nested ranges, a start/end range ended
//    on another thread, a mark; a DataLoader worker process;
//  - off-CPU intervals, futex waits, mmap/munmap, page faults;
//  - block I/O: a worker's reads in flight together, the main thread's
//    checkpoint writes to a device without a name.
// The counts the checks compare against come from `gpuos-trace dump` and
// `report` of this file, not from here.
//
//   gpu_trace_fixture OUT.gpuos [--steps N]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpuos_trace.pb.h"
#include "stream/trace_writer.h"

namespace gpuos {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kPid = 4100;        // python3 train.py
constexpr uint32_t kBackward = 4103;   // its autograd thread
constexpr uint32_t kWorker = 4200;     // a DataLoader worker process
constexpr uint32_t kOtherJob = 4300;   // another job on the same GPU
constexpr uint32_t kContext = 1;

v1::Event At(uint64_t ts, uint32_t pid, uint32_t tid) {
  v1::Event event;
  event.set_ts_ns(ts);
  event.set_pid(pid);
  event.set_tid(tid);
  return event;
}

class Fixture {
 public:
  explicit Fixture(int steps) : steps_(steps) {}

  std::vector<v1::Event> cpu;  // in time order
  std::vector<v1::Event> gpu;  // delivered late, a batch at a time

  void Build() {
    Processes();
    uint64_t t = 2000 * kMs;
    for (int step = 0; step < steps_; ++step) {
      Step(step, t);
      t += 20 * kMs;
      if (step % 3 == 2) FlushGpu();
    }
    FlushGpu();
    Exits(t + 5 * kMs);
  }

  const std::vector<v1::Event>& ordered() const { return out_; }

 private:
  void Push(v1::Event event) { out_.push_back(std::move(event)); }

  void Processes() {
    const uint64_t t = 1900 * kMs;
    v1::Event start = At(t, kPid, kPid);
    start.mutable_process_start()->set_comm("python3");
    start.mutable_process_start()->set_is_root(true);
    Push(start);
    v1::Event thread = At(t + 10 * kMs, kPid, kBackward);
    thread.mutable_thread_start()->set_comm("pt_autograd_0");
    thread.mutable_thread_start()->set_creator_tid(kPid);
    Push(thread);
    v1::Event worker = At(t + 20 * kMs, kWorker, kWorker);
    worker.mutable_process_start()->set_comm("pt_data_worker");
    worker.mutable_process_start()->set_ppid(kPid);
    Push(worker);
    v1::Event other = At(t + 30 * kMs, kOtherJob, kOtherJob);
    other.mutable_process_start()->set_comm("other_job");
    other.mutable_process_start()->set_ppid(kPid);
    Push(other);
  }

  void Exits(uint64_t t) {
    v1::Event other = At(t, kOtherJob, kOtherJob);
    other.mutable_process_exit()->set_comm("other_job");
    Push(other);
    v1::Event worker = At(t, kWorker, kWorker);
    worker.mutable_process_exit()->set_comm("pt_data_worker");
    Push(worker);
    v1::Event thread = At(t + kMs, kPid, kBackward);
    thread.mutable_thread_exit()->set_comm("pt_autograd_0");
    Push(thread);
    v1::Event root = At(t + 2 * kMs, kPid, kPid);
    root.mutable_process_exit()->set_comm("python3");
    Push(root);
  }

  uint32_t Api(uint64_t ts, uint32_t tid, uint64_t dur, const std::string& name,
              uint32_t pid = kPid) {
    v1::Event event = At(ts, pid, tid);
    v1::CudaApiCall* call = event.mutable_cuda_api();
    call->set_duration_ns(dur);
    call->set_name(name);
    const uint32_t id = ++correlation_;
    call->set_correlation_id(id);
    call->set_cbid(211);
    Push(event);
    return id;
  }

  void Kernel(uint64_t ts, uint64_t dur, const std::string& name, uint32_t id, uint32_t stream,
              uint32_t device = 0, uint32_t pid = kPid) {
    v1::Event event = At(ts, pid, 0);
    v1::GpuKernel* kernel = event.mutable_gpu_kernel();
    kernel->set_duration_ns(dur);
    kernel->set_name(name);
    kernel->set_device(device);
    kernel->set_context(kContext + device);
    kernel->set_stream(stream);
    kernel->set_correlation_id(id);
    kernel->set_grid_x(1024);
    kernel->set_grid_y(1);
    kernel->set_grid_z(1);
    kernel->set_block_x(256);
    kernel->set_block_y(1);
    kernel->set_block_z(1);
    kernel->set_registers_per_thread(64);
    gpu.push_back(event);
  }

  void Memcpy(uint64_t ts, uint64_t dur, uint64_t bytes, v1::MemcpyDirection direction,
              uint32_t id, uint32_t stream, uint32_t device = 0, uint32_t dst_device = 0) {
    v1::Event event = At(ts, kPid, 0);
    v1::GpuMemcpy* copy = event.mutable_gpu_memcpy();
    copy->set_duration_ns(dur);
    copy->set_bytes(bytes);
    copy->set_direction(direction);
    copy->set_src_kind(direction == v1::MEMCPY_HTOD ? v1::MEMORY_PINNED : v1::MEMORY_DEVICE);
    copy->set_dst_kind(direction == v1::MEMCPY_DTOH ? v1::MEMORY_PAGEABLE : v1::MEMORY_DEVICE);
    copy->set_async(direction != v1::MEMCPY_DTOH);
    copy->set_device(device);
    copy->set_context(kContext + device);
    copy->set_stream(stream);
    copy->set_correlation_id(id);
    copy->set_src_device(device);
    copy->set_dst_device(dst_device);
    gpu.push_back(event);
  }

  void Memset(uint64_t ts, uint64_t dur, uint32_t id, uint32_t stream) {
    v1::Event event = At(ts, kPid, 0);
    v1::GpuMemset* set = event.mutable_gpu_memset();
    set->set_duration_ns(dur);
    set->set_bytes(1 << 20);
    set->set_memory_kind(v1::MEMORY_DEVICE);
    set->set_async(true);
    set->set_device(0);
    set->set_context(kContext);
    set->set_stream(stream);
    set->set_correlation_id(id);
    gpu.push_back(event);
  }

  void Sync(uint64_t ts, uint64_t dur, v1::GpuSync::Kind kind, uint32_t id, uint32_t stream) {
    v1::Event event = At(ts, kPid, 0);
    v1::GpuSync* sync = event.mutable_gpu_sync();
    sync->set_duration_ns(dur);
    sync->set_kind(kind);
    sync->set_context(kContext);
    sync->set_stream(stream);
    sync->set_correlation_id(id);
    gpu.push_back(event);
  }

  void Nvtx(uint64_t ts, uint32_t tid, uint64_t dur, const std::string& name, uint32_t depth,
            bool start_end = false, uint32_t end_tid = 0) {
    v1::Event event = At(ts, kPid, tid);
    v1::NvtxRange* range = event.mutable_nvtx_range();
    range->set_duration_ns(dur);
    range->set_name(name);
    range->set_depth(depth);
    range->set_kind(start_end ? v1::NvtxRange::START_END : v1::NvtxRange::PUSH_POP);
    range->set_end_tid(end_tid);
    Push(event);
  }

  void OffCpu(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, v1::OffCpuCause cause,
              int32_t nr) {
    v1::Event event = At(ts, pid, tid);
    v1::OffCpu* off = event.mutable_off_cpu();
    off->set_duration_ns(dur);
    off->set_runqueue_ns(dur / 10);
    off->set_cause(cause);
    off->set_syscall_nr(nr);
    off->set_voluntary(cause != v1::OFF_CPU_CAUSE_PREEMPTED);
    Push(event);
  }

  void FutexWait(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur) {
    v1::Event event = At(ts, pid, tid);
    event.mutable_futex_wait()->set_duration_ns(dur);
    event.mutable_futex_wait()->set_uaddr(0x7f00001000);
    event.mutable_futex_wait()->set_op(137);
    Push(event);
  }

  void MmapPair(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t bytes) {
    v1::Event map = At(ts, pid, tid);
    map.mutable_mmap()->set_duration_ns(8 * kUs);
    map.mutable_mmap()->set_length(bytes);
    map.mutable_mmap()->set_prot(3);
    map.mutable_mmap()->set_flags(34);
    map.mutable_mmap()->set_fd(-1);
    map.mutable_mmap()->set_result(0x7f1000000000 + ts % 0x1000000 * 4096);
    Push(map);
    v1::Event unmap = At(ts + 300 * kUs, pid, tid);
    unmap.mutable_munmap()->set_duration_ns(40 * kUs);
    unmap.mutable_munmap()->set_addr(map.mmap().result());
    unmap.mutable_munmap()->set_length(bytes);
    Push(unmap);
  }

  // A block I/O request, pushed at its completion as the recorder writes it.
  void BlockIo(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t dur, uint32_t dev, const std::string& dev_name,
               const std::string& rwbs, uint32_t bytes, uint64_t sector) {
    v1::Event event = At(ts, pid, tid);
    v1::BlockIo* io = event.mutable_block_io();
    io->set_duration_ns(dur);
    io->set_dev(dev);
    io->set_dev_name(dev_name);
    io->set_sector(sector);
    io->set_bytes(bytes);
    io->set_rwbs(rwbs);
    Push(event);
  }

  void Step(int step, uint64_t t) {
    const std::string name = "step " + std::to_string(step);
    // The worker prepares the next batch: a fresh buffer, a page fault burst.
    MmapPair(t + 1 * kMs, kWorker, kWorker, 6 << 20);
    // It reads the batch's files: two requests in flight at once.
    BlockIo(t + 1100 * kUs, kWorker, kWorker, 600 * kUs, 259u << 20, "nvme0n1", "RA", 131072, 4096 + step * 512);
    BlockIo(t + 1200 * kUs, kWorker, kWorker, 500 * kUs, 259u << 20, "nvme0n1", "R", 65536, 8192 + step * 512);
    // Every third step the main thread writes a checkpoint to a device
    // whose name the recorder did not know.
    if (step % 3 == 0) {
      BlockIo(t + 2 * kMs, kPid, kPid, 900 * kUs, (8u << 20) | 16, "", "WS", 1 << 20, 100000 + step * 2048);
    }
    v1::Event faults = At(t + 1500 * kUs, kWorker, kWorker);
    faults.mutable_page_faults()->set_last_ns(t + 2 * kMs);
    faults.mutable_page_faults()->set_count(1536);
    // The step: waiting for the batch, forward on the main thread, backward
    // on the autograd thread, the optimizer, a sync at the end.
    Nvtx(t, kPid, 19 * kMs, name, 0);
    Nvtx(t + 100 * kUs, kPid, 3 * kMs, "get batch", 1, true, kPid);
    FutexWait(t + 200 * kUs, kPid, kPid, 2700 * kUs);
    OffCpu(t + 210 * kUs, kPid, kPid, 2680 * kUs, v1::OFF_CPU_CAUSE_FUTEX, 202);
    Push(faults);
    Nvtx(t + 3200 * kUs, kPid, 6 * kMs, "forward", 1);
    const uint32_t h2d = Api(t + 3300 * kUs, kPid, 30 * kUs, "cudaMemcpyAsync_v3020");
    Memcpy(t + 3400 * kUs, 500 * kUs, 8 << 20, v1::MEMCPY_HTOD, h2d, 7);
    Api(t + 3350 * kUs, kPid, 2 * kUs, "cudaGetDevice_v3020");  // no GPU work
    uint64_t gpu_at = t + 3950 * kUs;
    for (int k = 0; k < 6; ++k) {
      const uint64_t call = t + 3400 * kUs + k * 200 * kUs;
      const uint32_t id = Api(call, kPid, 12 * kUs, "cudaLaunchKernel_v7000");
      Kernel(gpu_at, 400 * kUs, k % 2 ? "volta_sgemm_128x64_nn" : "relu_kernel", id, 7);
      gpu_at += 420 * kUs;
    }
    const uint32_t zero = Api(t + 4700 * kUs, kPid, 10 * kUs, "cudaMemsetAsync_v3020");
    Memset(gpu_at, 30 * kUs, zero, 7);
    gpu_at += 50 * kUs;
    if (step % 4 == 1) OffCpu(t + 5 * kMs, kPid, kPid, 150 * kUs, v1::OFF_CPU_CAUSE_PREEMPTED, -1);
    // A captured graph: one call, two kernels that overlap on stream 7.
    const uint32_t graph = Api(t + 5500 * kUs, kPid, 20 * kUs, "cudaGraphLaunch_v10000");
    Kernel(gpu_at, 600 * kUs, "graph_gemm_a", graph, 7);
    Kernel(gpu_at + 200 * kUs, 600 * kUs, "graph_gemm_b", graph, 7);
    gpu_at += 900 * kUs;
    // Backward on its own thread and stream.
    Nvtx(t + 9300 * kUs, kBackward, 6 * kMs, "backward", 0);
    uint64_t bwd_at = std::max<uint64_t>(gpu_at, t + 9500 * kUs);
    for (int k = 0; k < 4; ++k) {
      const uint64_t call = t + 9400 * kUs + k * 300 * kUs;
      const uint32_t id = Api(call, kBackward, 14 * kUs, "cudaLaunchKernel_v7000");
      Kernel(bwd_at, 800 * kUs, "sgemm_backward", id, 13);
      bwd_at += 850 * kUs;
    }
    // A kernel whose call was not recorded (CUPTI dropped it).
    Kernel(bwd_at, 100 * kUs, "orphan_kernel", 0, 13);
    if (step == 0) {
      // A peer copy to the second device, and a kernel there.
      const uint32_t p2p = Api(t + 9450 * kUs, kBackward, 20 * kUs, "cudaMemcpyPeerAsync_v4000");
      Memcpy(t + 9600 * kUs, 300 * kUs, 1 << 20, v1::MEMCPY_PTOP, p2p, 7, 0, 1);
      const uint32_t k1 = Api(t + 9480 * kUs, kBackward, 12 * kUs, "cudaLaunchKernel_v7000");
      Kernel(t + 10 * kMs, 200 * kUs, "allreduce_stub", k1, 21, 1);
    }
    OffCpu(t + 10700 * kUs, kPid, kBackward, 3 * kMs, v1::OFF_CPU_CAUSE_SYSCALL, 202);
    // The optimizer and the end-of-step sync.
    Nvtx(t + 15 * kMs, kPid, 3 * kMs, "optimizer.step", 1);
    const uint32_t d2h = Api(t + 15200 * kUs, kPid, 400 * kUs, "cudaMemcpy_v3020");
    Memcpy(std::max<uint64_t>(bwd_at, t + 15250 * kUs), 200 * kUs, 4 << 10, v1::MEMCPY_DTOH, d2h, 7);
    const uint32_t sync = Api(t + 17 * kMs, kPid, 900 * kUs, "cudaStreamSynchronize_v3020");
    Sync(t + 17 * kMs + 5 * kUs, 880 * kUs, v1::GpuSync::STREAM, sync, 7);
    OffCpu(t + 17 * kMs + 20 * kUs, kPid, kPid, 850 * kUs, v1::OFF_CPU_CAUSE_SYSCALL, 16);
    // The last kernel of the step runs on past its end into the next step.
    const uint32_t tail = Api(t + 18400 * kUs, kPid, 10 * kUs, "cudaLaunchKernel_v7000");
    Kernel(t + 18500 * kUs, 2000 * kUs, "optimizer_tail", tail, 7);
    // Another job's kernel on the same GPU while this one waits for data.
    const uint32_t other = Api(t + 900 * kUs, kOtherJob, 10 * kUs, "cudaLaunchKernel_v7000", kOtherJob);
    Kernel(t + 1 * kMs, 1500 * kUs, "other_job_kernel", other, 7, 0, kOtherJob);
    if (step == 2) {
      v1::Event mark = At(t + 18 * kMs, kPid, kBackward);
      mark.mutable_nvtx_mark()->set_name("checkpoint");
      Push(mark);
    }
  }

  // CUPTI hands records over a buffer at a time, after the calls.
  void FlushGpu() {
    for (v1::Event& event : gpu) {
      Push(std::move(event));
    }
    gpu.clear();
  }

  int steps_;
  uint32_t correlation_ = 0;
  std::vector<v1::Event> out_;
};

int Main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gpu_trace_fixture OUT.gpuos [--steps N]\n");
    return 2;
  }
  int steps = 8;
  if (argc >= 4 && strcmp(argv[2], "--steps") == 0) steps = atoi(argv[3]);
  Fixture fixture(steps);
  fixture.Build();

  v1::TraceHeader header;
  header.set_format_version(1);
  header.set_tracer_version("gpu_trace_fixture");
  header.set_hostname("fixture");
  header.set_root_pid(kPid);
  header.add_command_line("python3");
  header.add_command_line("train.py");
  header.mutable_start_clock()->set_monotonic_ns(1800 * kMs);
  (*header.mutable_syscall_names())[16] = "ioctl";
  (*header.mutable_syscall_names())[202] = "futex";
  auto writer = TraceWriter::Create(argv[1]);
  if (!writer.ok()) {
    fprintf(stderr, "gpu_trace_fixture: %s\n", std::string(writer.status().message()).c_str());
    return 1;
  }
  absl::Status status = (*writer)->WriteHeader(header);
  for (const v1::Event& event : fixture.ordered()) {
    if (status.ok()) status = (*writer)->Append(event);
  }
  v1::TraceTrailer trailer;
  const uint64_t last = fixture.ordered().empty() ? 0 : fixture.ordered().back().ts_ns();
  trailer.mutable_end_clock()->set_monotonic_ns(last + 10 * kMs);
  trailer.set_root_exited(true);
  trailer.set_events_written(fixture.ordered().size());
  if (status.ok()) status = (*writer)->WriteTrailer(trailer);
  if (status.ok()) status = (*writer)->Close();
  if (!status.ok()) {
    fprintf(stderr, "gpu_trace_fixture: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpuos

int main(int argc, char** argv) { return gpuos::Main(argc, argv); }
