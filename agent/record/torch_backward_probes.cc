// Backward-pass uprobes on libtorch; see torch_backward_probes.h.
#include "record/torch_backward_probes.h"

#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/step_options.h"
#include "bpf/event_header.h"
#include "bpf/torch_uprobes.h"
#include "common/elf_symbols.h"
#include "common/path_name.h"
#include "record/mapped_library.h"
#include "record/sources/bpf_source.h"
#include "torch_uprobes.skel.h"

namespace gpuos {
namespace {

constexpr char kEngineExecutePrefix[] = "_ZN5torch8autograd6Engine7executeE";

}  // namespace

absl::StatusOr<std::vector<uint64_t>> AutogradEngineExecuteOffsets(const std::string& path) {
  auto offsets = ElfFunctionOffsets(
      path, [](absl::string_view name) { return absl::StartsWith(name, kEngineExecutePrefix); });
  if (!offsets.ok()) return offsets.status();
  std::set<uint64_t> unique;
  for (const auto& [name, offset] : *offsets) unique.insert(offset);
  if (unique.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s defines no torch::autograd::Engine::execute (%s...)", path, kEngineExecutePrefix));
  }
  return std::vector<uint64_t>(unique.begin(), unique.end());
}

bool DecodeTorchBackwardRecord(const void* data, size_t size, v1::Event* event) {
  if (size < sizeof(gpuos_torch_backward_event)) return false;
  auto* m = event->mutable_nvtx_mark();
  m->set_name(kDefaultBackwardRangeName);
  m->set_domain(kBackwardUprobeDomain);
  return true;
}

struct TorchBackwardProbes::Impl {
  torch_uprobes_bpf* skel = nullptr;
  std::vector<bpf_link*> links;
  bool detached = false;
  void DestroyLinks() {
    for (bpf_link* link : links) bpf_link__destroy(link);
    links.clear();
  }
  ~Impl() {
    DestroyLinks();
    if (skel) torch_uprobes_bpf__destroy(skel);
  }
};

void TorchBackwardProbes::Detach() {
  impl_->DestroyLinks();
  impl_->detached = true;
  pending_.clear();
}

TorchBackwardProbes::TorchBackwardProbes(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchBackwardProbes::~TorchBackwardProbes() = default;

absl::StatusOr<std::unique_ptr<TorchBackwardProbes>> TorchBackwardProbes::Load(
    const BpfSession& session) {
  auto impl = std::make_unique<Impl>();
  LIBBPF_OPTS(bpf_object_open_opts, open_opts);
  const BpfSessionOptions& options = session.options();
  if (!options.btf_path.empty()) open_opts.btf_custom_path = options.btf_path.c_str();
  impl->skel = torch_uprobes_bpf__open_opts(&open_opts);
  if (!impl->skel) {
    return absl::InternalError(
        absl::StrCat("cannot open the backward uprobe BPF object: ", strerror(errno)));
  }
  impl->skel->rodata->wakeup_bytes = options.ring_buffer_bytes / 8;
  if (absl::Status s = session.ShareMapsWith(impl->skel->obj); !s.ok()) return s;
  if (int err = torch_uprobes_bpf__load(impl->skel)) {
    return absl::InternalError(
        absl::StrCat("cannot load the backward uprobe BPF programs: ", strerror(-err)));
  }
  return std::unique_ptr<TorchBackwardProbes>(new TorchBackwardProbes(std::move(impl)));
}

absl::StatusOr<bool> TorchBackwardProbes::ProbeProcess(pid_t pid) {
  if (impl_->detached) return false;
  // The autograd engine lives in libtorch_cpu since PyTorch 1.5.
  const std::string path = FindMappedLibrary(pid, kLibtorchCpuPrefix);
  if (path.empty()) return false;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;  // gone meanwhile
  const std::pair<uint64_t, uint64_t> file{st.st_dev, st.st_ino};
  if (probed_.count(file)) return true;
  if (failed_.count(file)) {
    return absl::FailedPreconditionError(absl::StrCat(Basename(path), " could not be probed"));
  }
  auto offsets = AutogradEngineExecuteOffsets(path);
  absl::Status status = offsets.status();
  std::vector<bpf_link*> links;
  if (status.ok()) {
    for (uint64_t offset : *offsets) {
      // Entry only: bpf/torch_uprobes.h says why there is no uretprobe.
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = false);
      // pid -1: every process that maps the file, those that map it later
      // included (a launched job's DataLoader workers, its next exec).
      bpf_link* link = bpf_program__attach_uprobe_opts(impl_->skel->progs.torch_backward_entry, -1,
                                                       path.c_str(), offset, &opts);
      if (!link) {
        status = absl::InternalError(absl::StrFormat("cannot put a uprobe on %s at offset %#x: %s",
                                                     path, offset, strerror(errno)));
        break;
      }
      links.push_back(link);
    }
  }
  if (!status.ok()) {
    for (bpf_link* link : links) bpf_link__destroy(link);
    failed_.insert(file);
    notes_.push_back(absl::StrCat("backward uprobes: ", status.message()));
    return status;
  }
  impl_->links.insert(impl_->links.end(), links.begin(), links.end());
  probed_.insert(file);
  notes_.push_back(absl::StrFormat("backward uprobes on %s (%d Engine::execute entry point%s)",
                                   Basename(path), offsets->size(), offsets->size() == 1 ? "" : "s"));
  return true;
}

void TorchBackwardProbes::OnEvent(const v1::Event& event) {
  const pid_t pid = static_cast<pid_t>(event.pid());
  if (event.has_exec()) {
    found_.erase(pid);
    pending_.insert(pid);
  } else if (event.has_mmap() && event.mmap().fd() >= 0 && (event.mmap().prot() & PROT_EXEC) &&
             !found_.count(pid)) {
    pending_.insert(pid);
  } else if (event.has_process_exit()) {
    found_.erase(pid);
    pending_.erase(pid);
  }
}

void TorchBackwardProbes::CheckPending() {
  if (pending_.empty()) return;
  std::set<pid_t> todo;
  todo.swap(pending_);
  for (pid_t pid : todo) {
    absl::StatusOr<bool> found = ProbeProcess(pid);
    // A library that cannot be probed is not tried again.
    if (!found.ok() || *found) found_.insert(pid);
  }
}

}  // namespace gpuos

namespace gpuos {
namespace {

bool DecodeTorchBackward(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  if (!DecodeTorchBackwardRecord(data, size, event)) return false;
  emit(*event);
  return true;
}

}  // namespace

// This file is the torch uprobe source's module: TorchBackwardProbes loads it.
extern const BpfSourceModule kTorchUprobesSource = {
    "torch_uprobes",
    {{GPUOS_EV_TORCH_BACKWARD, "torch_backward", DecodeTorchBackward}},
    {{GPUOS_MAP_TORCH_IN_FLIGHT, "torch_in_flight"}},
    nullptr,  // TorchBackwardProbes::Load
};

}  // namespace gpuos
