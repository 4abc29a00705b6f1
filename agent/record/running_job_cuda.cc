// Choosing and setting up the CUDA recording of a running job's processes;
// see running_job_cuda.h.
#include "record/running_job_cuda.h"

#include <unistd.h>

#include <cstdio>

#include "common/valid_utf8.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "inject/library_injector.h"
#include "record/mapped_library.h"

namespace gpuos {
namespace {

// Loading CUPTI and enabling its activity kinds in a running process takes
// a few hundred ms; a flush at detach can take longer on a busy GPU.
constexpr absl::Duration kAttachTimeout = absl::Seconds(15);
constexpr absl::Duration kDetachTimeout = absl::Seconds(15);
// After an injection, the shim's control thread needs a moment to listen.
constexpr absl::Duration kListenerWait = absl::Seconds(3);

// Whether the shim's "attached ..." reply says CUPTI records now, or will
// at the process's first cuInit.
bool CuptiRecordsOrWill(const std::string& reply) {
  return absl::StrContains(reply, "cupti=1") || absl::StrContains(reply, "waiting");
}

absl::StatusOr<std::unique_ptr<ShimControlClient>> ConnectWithRetry(pid_t pid,
                                                                    absl::Duration wait) {
  absl::Time deadline = absl::Now() + wait;
  for (;;) {
    auto client = ShimControlClient::Connect(pid);
    if (client.ok() || absl::Now() >= deadline) return client;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace

bool RunningJobCuda::SwitchOn(pid_t pid, std::unique_ptr<ShimControlClient> client,
                            v1::CudaAttachStatus* status, const std::function<void()>& pump) {
  if (!options_.capture_spec.empty()) {
    // Before the attach, so that CUPTI starts with only the windows' kinds.
    auto capture = client->Capture(options_.capture_spec, kAttachTimeout, pump);
    if (!capture.ok()) {
      status->set_detail(absl::StrCat(status->detail(), status->detail().empty() ? "" : "; ",
                                      "--capture not applied: ", capture.status().message()));
    }
  }
  auto reply = client->Attach(options_.agent_socket, kAttachTimeout, pump);
  if (!reply.ok()) {
    status->set_detail(absl::StrCat(status->detail(), status->detail().empty() ? "" : "; ",
                                    reply.status().message()));
    return false;
  }
  // The reply is the target process's text: it may be anything.
  status->set_detail(absl::StrCat(status->detail(), status->detail().empty() ? "" : "; ", ValidUtf8(*reply)));
  shims_[pid] = std::move(client);
  return true;
}

void RunningJobCuda::AttachProcess(pid_t pid, const std::function<void()>& pump) {
  v1::CudaAttachStatus status;
  status.set_pid(static_cast<uint32_t>(pid));
  const std::string libcuda = FindMappedLibrary(pid, "libcuda.so");
  const bool shim_mapped = !FindMappedLibrary(pid, "libgpuos_shim.so").empty();
  if (libcuda.empty() && !shim_mapped) return;  // no CUDA, nothing to switch on

  // 1. A prepared (or earlier injected) shim is listening already.
  if (shim_mapped) {
    auto client = ShimControlClient::Connect(pid);
    if (client.ok()) {
      status.set_mode("prepared");
      if (SwitchOn(pid, std::move(*client), &status, pump) &&
          (libcuda.empty() || CuptiRecordsOrWill(status.detail()))) {
        statuses_.push_back(status);
        return;
      }
    } else {
      status.set_detail(std::string(client.status().message()));
    }
  }
  if (libcuda.empty()) {
    // A shim that does not answer in a process without CUDA: NVTX is all it
    // could have given.
    status.set_mode("none");
    statuses_.push_back(status);
    return;
  }

  // 2. Inject the shim.
  std::string why_not_injected;
  if (!options_.inject) {
    why_not_injected = "--no-inject";
  } else if (options_.shim_path.empty()) {
    why_not_injected = "the CUDA shim (libgpuos_shim.so) is not installed next to gpuos-trace";
  } else if (!shim_mapped) {
    InjectionRequest request;
    request.pid = pid;
    request.library_path = options_.shim_path;
    request.entry_symbol = "gpuos_shim_attach_entry";
    auto injected = InjectLibrary(request);
    if (!injected.ok()) {
      why_not_injected = absl::StrCat("injection failed: ", injected.status().message());
    } else {
      status.set_stopped_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(injected->stopped)));
      status.set_mode("injected");
      if (options_.verbose) {
        fprintf(stderr, "gpuos-trace: pid %d: shim injected through thread %d (stopped %.2f ms)\n",
                pid, injected->hijacked_tid, absl::ToDoubleMilliseconds(injected->stopped));
      }
      auto client = ConnectWithRetry(pid, kListenerWait);
      if (client.ok() && SwitchOn(pid, std::move(*client), &status, pump) &&
          CuptiRecordsOrWill(status.detail())) {
        statuses_.push_back(status);
        return;
      }
      why_not_injected = absl::StrCat(
          "the injected shim could not record CUDA: ",
          client.ok() ? status.detail() : std::string(client.status().message()));
    }
  } else {
    why_not_injected = absl::StrCat("the shim in the process could not record CUDA: ", status.detail());
  }

  // 3. uprobes on the driver library: CPU side only.
  auto probed = bpf_->AttachCudaUprobes(pid, libcuda);
  if (probed.ok()) {
    status.set_mode("uprobes");
    status.set_detail(absl::StrFormat(
        "%s; %d driver functions probed: CPU side of CUDA API calls only (GPU timing needs the "
        "shim)",
        why_not_injected, *probed));
  } else {
    status.set_mode("none");
    status.set_detail(absl::StrCat(why_not_injected, "; uprobes: ", probed.status().message()));
  }
  statuses_.push_back(status);
}

void RunningJobCuda::DetachAll(const std::function<void()>& pump) {
  for (auto& [pid, client] : shims_) {
    auto reply = client->Detach(kDetachTimeout, pump);
    if (!reply.ok()) {
      fprintf(stderr, "gpuos-trace: warning: %s\n", std::string(reply.status().message()).c_str());
    }
  }
  shims_.clear();  // closing the connections: any shim not yet off goes idle
}

}  // namespace gpuos
