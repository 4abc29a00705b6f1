// How the CUDA side of each process of a running job (running_job.h) is
// recorded, in the order of preference of issue #6:
//   1. the shim is already in the process (`gpuos-trace --prepare`): switch
//      it on through its control socket;
//   2. inject the shim with ptrace (inject/library_injector.h), then switch
//      it on the same way;
//   3. neither: eBPF uprobes on the process's libcuda record the CPU side of
//      the driver API (BpfSession::AttachCudaUprobes); GPU timing needs 1/2.
// Every decision, with its reason, ends up in the trailer (CudaAttachStatus)
// and in the end summary.  Detach switches every shim off again, after it
// has flushed what it holds.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpuos_trace.pb.h"
#include "record/bpf_session.h"
#include "record/shim_control_client.h"

namespace gpuos {

struct RunningJobCudaOptions {
  std::string shim_path;     // "" when the shim is not installed
  std::string agent_socket;  // the ShimListener's socket
  bool inject = true;        // false: --no-inject
  std::string capture_spec;  // --capture: sent to the shim before the attach
  bool verbose = false;
};

class RunningJobCuda {
 public:
  RunningJobCuda(RunningJobCudaOptions options, BpfSession* bpf) : options_(std::move(options)), bpf_(bpf) {}

  // Decides and sets up the CUDA recording of one process (a no-op for a
  // process without CUDA or a shim).  `pump` keeps the agent reading the
  // shim's events while it waits for answers.
  void AttachProcess(pid_t pid, const std::function<void()>& pump);

  // Switches every attached shim off; each flushes first.
  void DetachAll(const std::function<void()>& pump);

  const std::vector<v1::CudaAttachStatus>& statuses() const { return statuses_; }

 private:
  bool SwitchOn(pid_t pid, std::unique_ptr<ShimControlClient> client, v1::CudaAttachStatus* status,
                const std::function<void()>& pump);

  RunningJobCudaOptions options_;
  BpfSession* bpf_;
  std::map<pid_t, std::unique_ptr<ShimControlClient>> shims_;
  std::vector<v1::CudaAttachStatus> statuses_;
};

}  // namespace gpuos
