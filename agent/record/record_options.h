// What a recording is asked to do: the record options of gpuos-trace's
// command line (cli/options.h), for a launched command (launched_job.h), an
// attach to running processes (running_job.h) or --prepare (prepare.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/syscalls.h"

namespace gpuos {

struct RecordOptions {
  std::string output_path;
  std::vector<std::string> command;
  bool run_as_root = false;
  uint64_t ring_buffer_bytes = 16ull << 20;
  // --max-size: recording stops writing events at this file size, and the
  // trace says so (0: no cap).
  uint64_t max_file_bytes = 0;
  // --flight-recorder SIZE|DURATION: keep only the latest events in a ring
  // of segment files (one of the two bounds set) and write them out as a
  // trace at the end, on SIGUSR1 or `gpuos-trace ctl dump`, and on a slow
  // step (stream/flight_recorder.h).
  uint64_t flight_bytes = 0;
  uint64_t flight_span_ns = 0;
  // --flight-trigger slow-step=Nx: N, 0 when off (record/slow_step_trigger.h).
  double flight_slow_step_factor = 0;
  uint64_t fault_window_ns = 1'000'000;
  // --syscall-slots: traced threads at a time whose syscall totals the
  // kernel keeps in per-thread arrays (bpf/syscalls.h); the others, and all
  // when 0, go through a hash, which costs each syscall more.
  uint32_t syscall_slots = GPUOS_DEFAULT_SYSCALL_SLOTS;
  std::string btf_path;
  bool quiet = false;
  bool verbose = false;
  // Record NVTX and CUDA through the shim (cupti_shim/).
  bool cuda = true;
  // The shim library; empty: found next to the gpuos-trace binary.
  std::string shim_path;
  // Put the Python start-up hook (agent/python_hooks/) on PYTHONPATH.
  bool python_hooks = true;
  // --cuda-records: the CUDA record kinds to enable, a comma list of
  // kernel, memcpy, memset, sync, runtime, driver; empty: all.  Fewer
  // kinds cost the job less (docs/results.md).
  std::string cuda_records;
  // --capture SPEC (--always-on: its preset): full CUDA detail only in the
  // windows the spec names (cupti_shim/capture_spec.h), the OS side all the
  // time; empty: CUDA detail all the time.
  std::string capture_spec;
  // gpuos-trace's own command line, kept in the trace header.
  std::vector<std::string> tracer_argv;

  // Attach mode (--pid, --gpu-procs): trace running processes instead of
  // launching `command` (running_job.h).
  std::vector<int> attach_pids;
  bool gpu_procs = false;
  // --duration: stop after this long; 0: at Ctrl-C or when the job ends.
  uint64_t duration_ns = 0;
  // --no-inject: never ptrace a process; CUDA through uprobes only.
  bool inject = true;
  // --prepare: start `command` with the shim loaded but idle, for a later
  // attach (prepare.h).
  bool prepare = false;

  bool attaching() const { return !attach_pids.empty() || gpu_procs; }
  bool flight_recorder() const { return flight_bytes != 0 || flight_span_ns != 0; }
};

}  // namespace gpuos
