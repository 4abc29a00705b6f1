// Backward passes of PyTorch jobs that carry no annotations, from eBPF
// uprobes on the autograd engine (bpf/torch_uprobes.*): a uprobe on the
// entry of torch::autograd::Engine::execute in libtorch_cpu.so, which
// every backward pass of a Python or C++ job runs through on the thread
// that asked for it (entry only: a uretprobe would make a C++ exception
// thrown through it end the job).  This module finds the library in the traced
// processes (at attach, and in a launched job when a traced process maps
// an executable file: `import torch` dlopens it, a LibTorch program's
// loader maps it), resolves the symbol, attaches the probes to the file
// (once per file: every process mapping it hits them, and the BPF side
// keeps those outside the traced tree out), and turns each record into an
// "autograd.backward" NvtxMark in the domain kBackwardUprobeDomain at the
// start of the backward pass (the Python start-up hook records NVTX
// ranges of that name; the step finder reads both, analysis/step_finder.h).
// Cost: one uprobe hit per backward pass of any process that maps a probed
// libtorch_cpu (untraced ones return after the traced-set test); none per
// operator or per kernel.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuos_trace.pb.h"
#include "record/bpf_session.h"

namespace gpuos {

// libtorch_cpu.so, libtorch_cpu.so.1.13...
inline constexpr char kLibtorchCpuPrefix[] = "libtorch_cpu.so";

// File offsets of torch::autograd::Engine::execute (every overload: the
// mangled names that start with _ZN5torch8autograd6Engine7executeE; not
// execute_with_graph_task, which it calls) in the library at `path`.
// NotFound when it defines none.
absl::StatusOr<std::vector<uint64_t>> AutogradEngineExecuteOffsets(const std::string& path);

// A GPUOS_EV_TORCH_BACKWARD record as its stream event (an NvtxMark);
// false when the record is too short.
bool DecodeTorchBackwardRecord(const void* data, size_t size, v1::Event* event);

class TorchBackwardProbes {
 public:
  // Loads the BPF programs into `session`'s maps; attaches nothing yet.
  static absl::StatusOr<std::unique_ptr<TorchBackwardProbes>> Load(const BpfSession& session);
  // Detaches every probe.
  ~TorchBackwardProbes();
  // Detaches every probe now; nothing is probed afterwards.
  void Detach();
  TorchBackwardProbes(const TorchBackwardProbes&) = delete;
  TorchBackwardProbes& operator=(const TorchBackwardProbes&) = delete;

  // Probes the libtorch_cpu process `pid` maps, unless its file already
  // has probes.  True when pid maps a probed library now; false when it
  // maps none (yet); an error when its library cannot be probed.
  absl::StatusOr<bool> ProbeProcess(pid_t pid);

  // What the recording saw of a traced process: an executable file mapping
  // (a library load) makes it worth a look, until its libtorch_cpu is
  // found; an exec starts it over.
  void OnEvent(const v1::Event& event);
  // A process found running at attach: worth a look.
  void Watch(pid_t pid) { pending_.insert(pid); }
  // Looks at the processes OnEvent marked (cheap when none is).
  void CheckPending();

  // One line per probed file ("libtorch_cpu.so.1.13: 1 function") and per
  // failure, for the end summary.
  const std::vector<std::string>& notes() const { return notes_; }
  size_t probed_files() const { return probed_.size(); }

 private:
  struct Impl;
  explicit TorchBackwardProbes(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::set<std::pair<uint64_t, uint64_t>> probed_;  // (device, inode)
  std::set<std::pair<uint64_t, uint64_t>> failed_;
  std::set<pid_t> found_;    // processes that map a probed (or failed) file
  std::set<pid_t> pending_;  // processes to look at
  std::vector<std::string> notes_;
};

}  // namespace gpuos
