// A small simulator of a training loop for the diagnosis tests: it plays
// the launching thread's calls against per-stream GPU queues (a kernel
// starts when its launch is done and its stream is free; a synchronous copy
// returns when its GPU copy ends), writing the events the tracer would
// record.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/diagnosis.h"
#include "analysis/step_analysis.h"
#include "gpuos_trace.pb.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace diagnosis_sim {

constexpr uint32_t kPid = 1000;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

inline v1::Event Ev(uint64_t ts, uint32_t pid = kPid, uint32_t tid = kPid) {
  v1::Event e;
  e.set_ts_ns(ts);
  e.set_pid(pid);
  e.set_tid(tid);
  return e;
}

class Sim {
 public:
  explicit Sim(int worker_processes = 0, uint32_t online_cpus = 0) {
    header_.set_online_cpus(online_cpus);
    events_.push_back(ProcessStart(kPid, 1));
    for (int i = 0; i < worker_processes; ++i) {
      events_.push_back(ProcessStart(kPid + 1 + i, kPid));
      workers_alive_.push_back(kPid + 1 + i);
    }
  }

  void BeginStep() { step_start_ = now_; }
  void EndStep() {
    Range(step_start_, now_, absl::StrFormat("step %d", step_++));
  }
  // A DataLoader fetch: blocked on the workers' queue, then on the CPU.
  void GetBatch(uint64_t futex, uint64_t running) {
    const uint64_t start = now_;
    if (futex) OffCpu(now_, now_ + futex, v1::OFF_CPU_CAUSE_FUTEX);
    now_ += futex + running;
    Range(start, now_, "get batch");
  }
  void Cpu(uint64_t d) { now_ += d; }
  // tensor.to(device): pageable + synchronous, or pinned + non_blocking; or,
  // with `async_api` unlike `pinned_async`, a non_blocking copy from
  // pageable memory (the call still blocks while the driver stages it).
  void Copy(uint64_t gpu_ns, bool pinned_async, uint32_t stream) { Copy(gpu_ns, pinned_async, stream, pinned_async); }
  void Copy(uint64_t gpu_ns, bool pinned_async, uint32_t stream, bool async_api) {
    const uint32_t corr = corr_++;
    const uint64_t gpu_start = std::max(now_ + 5 * kUs, free_[stream]);
    const uint64_t gpu_end = gpu_start + gpu_ns;
    free_[stream] = gpu_end;
    v1::Event g = Ev(gpu_start, kPid, 0);
    v1::GpuMemcpy* m = g.mutable_gpu_memcpy();
    m->set_duration_ns(gpu_ns);
    m->set_direction(v1::MEMCPY_HTOD);
    m->set_src_kind(pinned_async ? v1::MEMORY_PINNED : v1::MEMORY_PAGEABLE);
    m->set_dst_kind(v1::MEMORY_DEVICE);
    m->set_async(async_api);
    m->set_stream(stream);
    m->set_correlation_id(corr);
    m->set_bytes(gpu_ns * 10);  // ~10 GB/s
    events_.push_back(g);
    const uint64_t api_end = pinned_async ? now_ + 10 * kUs : gpu_end + 20 * kUs;
    Api(now_, api_end, async_api ? "cudaMemcpyAsync_v3020" : "cudaMemcpy_v3020", corr);
    if (!pinned_async && api_end - now_ > 100 * kUs) {
      OffCpu(now_ + 10 * kUs, api_end - 10 * kUs, v1::OFF_CPU_CAUSE_FUTEX);
    }
    now_ = api_end;
  }
  void Munmap(uint64_t d, uint64_t bytes) {
    v1::Event e = Ev(now_);
    e.mutable_munmap()->set_duration_ns(d);
    e.mutable_munmap()->set_length(bytes);
    events_.push_back(e);
    now_ += d;
  }
  void Launch(uint64_t kernel_ns, uint32_t stream, uint64_t api_ns = 8 * kUs, const std::string& name = "kernel") {
    const uint32_t corr = corr_++;
    Api(now_, now_ + api_ns, "cudaLaunchKernel_v7000", corr);
    now_ += api_ns;
    const uint64_t start = std::max(now_ + 2 * kUs, free_[stream]);
    free_[stream] = start + kernel_ns;
    v1::Event k = Ev(start, kPid, 0);
    k.mutable_gpu_kernel()->set_duration_ns(kernel_ns);
    k.mutable_gpu_kernel()->set_name(name);
    k.mutable_gpu_kernel()->set_stream(stream);
    k.mutable_gpu_kernel()->set_correlation_id(corr);
    events_.push_back(k);
  }
  // One replay of a captured CUDA graph: one launch call, then its kernels
  // back to back on `stream`, each marked with the graph's id.
  void GraphLaunch(int kernels, uint64_t kernel_ns, uint32_t stream, uint64_t api_ns = 10 * kUs) {
    const uint32_t corr = corr_++;
    Api(now_, now_ + api_ns, "cudaGraphLaunch_v10000", corr);
    now_ += api_ns;
    uint64_t start = std::max(now_ + 2 * kUs, free_[stream]);
    for (int i = 0; i < kernels; ++i) {
      v1::Event k = Ev(start, kPid, 0);
      k.mutable_gpu_kernel()->set_duration_ns(kernel_ns);
      k.mutable_gpu_kernel()->set_name("graph_kernel");
      k.mutable_gpu_kernel()->set_stream(stream);
      k.mutable_gpu_kernel()->set_correlation_id(corr);
      k.mutable_gpu_kernel()->set_graph_id(1);
      k.mutable_gpu_kernel()->set_graph_node_id(i + 1);
      events_.push_back(k);
      start += kernel_ns + 1 * kUs;
    }
    free_[stream] = start;
  }
  // The compute stream waits for the copy stream (cudaStreamWaitEvent).
  void StreamWait(uint32_t waiter, uint32_t on) {
    Api(now_, now_ + 3 * kUs, "cudaStreamWaitEvent_v3020", corr_++);
    now_ += 3 * kUs;
    free_[waiter] = std::max(free_[waiter], free_[on]);
  }
  // loss.item(): waits until every stream is done.
  void Sync() {
    uint64_t end = now_ + 5 * kUs;
    for (const auto& [stream, free] : free_) end = std::max(end, free + 5 * kUs);
    Api(now_, end, "cudaStreamSynchronize_v3020", corr_++);
    if (end - now_ > 50 * kUs) OffCpu(now_ + 5 * kUs, end - 5 * kUs, v1::OFF_CPU_CAUSE_FUTEX);
    now_ = end;
  }
  // torch.cuda.empty_cache()'s cudaFree: waits until every stream is done,
  // then takes `d` to hand the memory back.
  void Free(uint64_t d) {
    uint64_t end = now_;
    for (const auto& [stream, free] : free_) end = std::max(end, free);
    Api(now_, end + d, "cudaFree_v3020", corr_++);
    now_ = end + d;
  }
  // cudaMalloc: `d` in the driver, no wait for the GPU.
  void Malloc(uint64_t d) {
    Api(now_, now_ + d, "cudaMalloc_v3020", corr_++);
    now_ += d;
  }
  void Preempt(uint64_t d) {
    v1::Event e = Ev(now_);
    e.mutable_off_cpu()->set_duration_ns(d);
    e.mutable_off_cpu()->set_runqueue_ns(d);
    e.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_PREEMPTED);
    e.mutable_off_cpu()->set_voluntary(false);
    events_.push_back(e);
    now_ += d;
  }
  // A request to worker process `worker` and the wait for its reply (an
  // environment stepped in a subprocess): the worker, blocked until the
  // request, runs for `d`, and its reply wakes the thread.
  void WaitOnWorker(uint32_t worker, uint64_t d) {
    const uint32_t wtid = kPid + 1 + worker;
    OffCpu(now_ - std::min<uint64_t>(now_, 1 * kMs), now_ + 1 * kUs, v1::OFF_CPU_CAUSE_SYSCALL, wtid, kPid);
    OffCpu(now_, now_ + d, v1::OFF_CPU_CAUSE_SYSCALL, kPid, wtid);
    now_ += d;
  }
  // A batch from data worker process `worker`: the thread blocks in futex
  // over `d` until the worker, which meanwhile `does` one thing, hands it
  // the batch.
  enum class WorkerDoes { kPreprocessing, kReadingDisk, kWaitingForCpu };
  void GetBatchFrom(uint32_t worker, uint64_t d, WorkerDoes does) {
    const uint32_t wtid = kPid + 1 + worker;
    const uint64_t start = now_;
    OffCpu(now_, now_ + d, v1::OFF_CPU_CAUSE_FUTEX, kPid, wtid);
    const uint64_t busy_end = now_ + d - std::min<uint64_t>(d, 20 * kUs);
    if (does == WorkerDoes::kReadingDisk) {
      OffCpu(now_, busy_end, v1::OFF_CPU_CAUSE_SYSCALL, wtid);
      v1::Event io = Ev(now_, wtid, wtid);
      io.mutable_block_io()->set_duration_ns(busy_end - now_);
      io.mutable_block_io()->set_bytes(4 << 20);
      io.mutable_block_io()->set_rwbs("R");
      events_.push_back(io);
    } else if (does == WorkerDoes::kWaitingForCpu) {
      v1::Event e = Ev(now_, wtid, wtid);
      e.mutable_off_cpu()->set_duration_ns(busy_end - now_);
      e.mutable_off_cpu()->set_runqueue_ns(busy_end - now_);
      e.mutable_off_cpu()->set_cause(v1::OFF_CPU_CAUSE_PREEMPTED);
      events_.push_back(e);
    }
    now_ += d;
    Range(start, now_, "get batch");
  }
  // A DataLoader's iterator made anew (an epoch's iter() without
  // persistent_workers): the workers alive exit, and the thread starts `n`
  // new ones, each exec'ing a new interpreter when `exec` (spawn), over `d`.
  void StartWorkers(int n, bool exec, uint64_t d) {
    for (uint32_t pid : workers_alive_) {
      v1::Event e = Ev(now_, pid, pid);
      e.mutable_process_exit()->set_comm("python");
      events_.push_back(e);
    }
    workers_alive_.clear();
    for (int i = 0; i < n; ++i) {
      const uint32_t pid = next_child_++;
      workers_alive_.push_back(pid);
      v1::Event start = Ev(now_ + i * d / n, pid, pid);
      start.mutable_process_start()->set_ppid(kPid);
      start.mutable_process_start()->set_parent_tid(kPid);
      // The forking thread's name, which PyTorch 2.3-2.4 changes.
      start.mutable_process_start()->set_comm("pt_main_thread");
      events_.push_back(start);
      if (exec) {
        v1::Event e = Ev(now_ + i * d / n + 1 * kUs, pid, pid);
        e.mutable_exec()->set_old_tid(pid);
        e.mutable_exec()->set_comm("python3.12");
        events_.push_back(e);
      }
    }
    now_ += d;
  }
  // A tool run from the loop (subprocess.run(["nvidia-smi", ...])): a child
  // that exec's another program, waited for over `d`.
  void RunTool(const std::string& comm, uint64_t d) {
    const uint32_t pid = next_child_++;
    v1::Event start = Ev(now_, pid, pid);
    start.mutable_process_start()->set_ppid(kPid);
    start.mutable_process_start()->set_parent_tid(kPid);
    start.mutable_process_start()->set_comm("python");
    events_.push_back(start);
    v1::Event e = Ev(now_ + 1 * kUs, pid, pid);
    e.mutable_exec()->set_old_tid(pid);
    e.mutable_exec()->set_comm(comm);
    events_.push_back(e);
    OffCpu(now_ + 2 * kUs, now_ + d, v1::OFF_CPU_CAUSE_SYSCALL, kPid, pid);
    now_ += d;
  }
  // An NVTX range of `d` on the thread (the Python hook's "autograd.backward").
  void Mark(const std::string& name, uint64_t d) {
    Range(now_, now_ + d, name);
    now_ += d;
  }
  // A worker process being switched out (it competes for the CPUs).
  void WorkerSwitch(uint32_t worker, bool voluntary, uint64_t runqueue) {
    v1::Event e = Ev(now_, kPid + 1 + worker, kPid + 1 + worker);
    e.mutable_off_cpu()->set_duration_ns(runqueue + 10 * kUs);
    e.mutable_off_cpu()->set_runqueue_ns(runqueue);
    e.mutable_off_cpu()->set_cause(voluntary ? v1::OFF_CPU_CAUSE_FUTEX : v1::OFF_CPU_CAUSE_PREEMPTED);
    e.mutable_off_cpu()->set_voluntary(voluntary);
    events_.push_back(e);
  }

  StepAnalysis Analyze() const {
    auto a = AnalyzeStepEvents(header_, events_, StepOptions());
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : StepAnalysis();
  }

 private:
  static v1::Event ProcessStart(uint32_t pid, uint32_t ppid) {
    v1::Event e = Ev(0, pid, pid);
    e.mutable_process_start()->set_ppid(ppid);
    e.mutable_process_start()->set_comm("python");
    return e;
  }
  void Range(uint64_t start, uint64_t end, const std::string& name) {
    v1::Event e = Ev(start);
    e.mutable_nvtx_range()->set_duration_ns(end - start);
    e.mutable_nvtx_range()->set_name(name);
    events_.push_back(e);
  }
  void Api(uint64_t start, uint64_t end, const std::string& name, uint32_t corr) {
    v1::Event e = Ev(start);
    e.mutable_cuda_api()->set_duration_ns(end - start);
    e.mutable_cuda_api()->set_name(name);
    e.mutable_cuda_api()->set_correlation_id(corr);
    events_.push_back(e);
  }
  // Thread `tid` (pid == tid: the job's main thread or a worker process)
  // blocked over [start, end), woken by `waker` when not 0.
  void OffCpu(uint64_t start, uint64_t end, v1::OffCpuCause cause, uint32_t tid = kPid, uint32_t waker = 0) {
    v1::Event e = Ev(start, tid, tid);
    e.mutable_off_cpu()->set_duration_ns(end - start);
    e.mutable_off_cpu()->set_cause(cause);
    e.mutable_off_cpu()->set_voluntary(true);
    if (waker != 0) {
      e.mutable_off_cpu()->set_woken_by_tid(waker);
      e.mutable_off_cpu()->set_waker_pid(waker);
      e.mutable_off_cpu()->set_waker_context_known(true);
    }
    events_.push_back(e);
  }

  v1::TraceHeader header_;
  std::vector<v1::Event> events_;
  uint64_t now_ = 10 * kMs;
  uint64_t step_start_ = 0;
  int step_ = 0;
  uint32_t corr_ = 1;
  uint32_t next_child_ = kPid + 500;
  std::vector<uint32_t> workers_alive_;
  std::map<uint32_t, uint64_t> free_;
};

constexpr uint32_t kCompute = 7;
constexpr uint32_t kCopyStream = 8;

inline bool HasFinding(const Diagnosis& d, Bottleneck b) {
  if (d.primary.bottleneck == b) return true;
  for (const Finding& f : d.secondary) {
    if (f.bottleneck == b) return true;
  }
  return false;
}

inline const Finding* FindingOf(const Diagnosis& d, Bottleneck b) {
  if (d.primary.bottleneck == b) return &d.primary;
  for (const Finding& f : d.secondary) {
    if (f.bottleneck == b) return &f;
  }
  return nullptr;
}

inline std::string Describe(const Diagnosis& d) {
  std::string s = absl::StrFormat("%s (%.3f): %s [%s]", BottleneckKey(d.primary.bottleneck), d.primary.score,
                                  d.primary.evidence, d.headline);
  for (const Finding& f : d.secondary) {
    s += absl::StrFormat("\n  + %s (%.3f, gain %.3f)", BottleneckKey(f.bottleneck), f.score, f.gain.value_or(-1));
  }
  return s;
}

// PPO with its 4 environments in subprocesses (Stable-Baselines3's
// SubprocVecEnv, one per worker process), `steps` iterations: per
// environment step a few launches, a sync and the wait on that worker; then
// the update, marked by the Python hook's backward range when `hook`.
inline StepAnalysis EnvironmentsInSubprocesses(bool hook, int steps) {
  Sim sim(4);
  for (int i = 0; i < steps; ++i) {
    sim.BeginStep();
    for (int env_step = 0; env_step < 4; ++env_step) {
      for (int k = 0; k < 3; ++k) sim.Launch(20 * kUs, kCompute);
      sim.Sync();
      sim.WaitOnWorker(env_step, 2 * kMs);
    }
    if (hook) sim.Mark("autograd.backward", 10 * kUs);
    for (int k = 0; k < 10; ++k) sim.Launch(100 * kUs, kCompute);
    sim.Sync();
    sim.EndStep();
  }
  return sim.Analyze();
}

}  // namespace diagnosis_sim
}  // namespace gpuos
