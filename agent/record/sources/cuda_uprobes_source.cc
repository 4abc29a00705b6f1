// The CUDA driver uprobe source: bpf/cuda_uprobes.bpf.c, its per-process
// links and its records' decoding; see cuda_uprobes_source.h.
#include "record/sources/cuda_uprobes_source.h"

#include <bpf/bpf.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "bpf/cuda_uprobes.h"
#include "common/elf_symbols.h"
#include "cuda_uprobes.skel.h"
#include "record/bpf_session.h"
#include "record/sources/skeleton_source.h"

namespace gpuos {
namespace {

struct CudaFunction {
  const char* name;
  uint32_t args;  // enum gpuos_cuda_args
};

constexpr CudaFunction kCudaFunctions[] = {
#define GPUOS_CUDA_FN_ENTRY(name, args) {#name, args},
    GPUOS_CUDA_UPROBE_FUNCTIONS(GPUOS_CUDA_FN_ENTRY)
#undef GPUOS_CUDA_FN_ENTRY
};
static_assert(sizeof(kCudaFunctions) / sizeof(kCudaFunctions[0]) == GPUOS_CUDA_FN_COUNT);

// Whether to probe with one uprobe_multi link per process and direction
// (Linux 6.6; libbpf 1.1 predates it, hence the raw syscall below) instead
// of one perf-event link per function.  Removing a perf-event uprobe waits
// for RCU grace periods under a global lock, about 0.1 s each: 12 s to
// detach 53 functions from one process; a uprobe_multi link waits once.
// From 6.10 only: before it, such a link's pid filter let through only the
// thread whose pid was given, not the whole process.
bool KernelFiltersUprobeMultiByProcess() {
  struct utsname u;
  int major = 0, minor = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 10);
}

constexpr uint32_t kBpfTraceUprobeMulti = 48;     // enum bpf_attach_type, Linux 6.6
constexpr uint32_t kBpfFUprobeMultiReturn = 1;  // BPF_F_UPROBE_MULTI_RETURN

// BPF_LINK_CREATE for a uprobe_multi link: `prog` at each file offset of
// `path` (with its cookie), in process `pid` only.  Returns the link's fd,
// or -errno.
int CreateUprobeMultiLink(const bpf_program* prog, const std::string& path,
                          const std::vector<uint64_t>& offsets,
                          const std::vector<uint64_t>& cookies, bool retprobe, pid_t pid) {
  // union bpf_attr's link_create member as of Linux 6.6.
  struct {
    uint32_t prog_fd;
    uint32_t target_fd;
    uint32_t attach_type;
    uint32_t flags;
    uint64_t path;
    uint64_t offsets;
    uint64_t ref_ctr_offsets;
    uint64_t cookies;
    uint32_t cnt;
    uint32_t multi_flags;
    uint32_t pid;
    uint32_t pad;
  } link_create = {};
  link_create.prog_fd = static_cast<uint32_t>(bpf_program__fd(prog));
  link_create.attach_type = kBpfTraceUprobeMulti;
  link_create.path = reinterpret_cast<uintptr_t>(path.c_str());
  link_create.offsets = reinterpret_cast<uintptr_t>(offsets.data());
  link_create.cookies = reinterpret_cast<uintptr_t>(cookies.data());
  link_create.cnt = static_cast<uint32_t>(offsets.size());
  link_create.multi_flags = retprobe ? kBpfFUprobeMultiReturn : 0;
  link_create.pid = static_cast<uint32_t>(pid);
  union bpf_attr attr;
  static_assert(sizeof(attr) >= sizeof(link_create));
  memset(&attr, 0, sizeof(attr));
  memcpy(&attr, &link_create, sizeof(link_create));
  long fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
  return fd < 0 ? -errno : static_cast<int>(fd);
}

// The listed driver functions `library_path` defines, by file offset: one
// probe per address, since where the library gives two listed names to one
// function both would fire on every call.
absl::StatusOr<std::map<uint64_t, uint32_t>> FunctionsByOffset(const std::string& library_path) {
  std::set<std::string> names;
  for (const CudaFunction& fn : kCudaFunctions) names.insert(fn.name);
  absl::StatusOr<std::map<std::string, uint64_t>> offsets = ElfFunctionOffsets(
      library_path, [&names](absl::string_view name) { return names.count(std::string(name)) > 0; });
  if (!offsets.ok()) return offsets.status();
  if (offsets->empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s exports none of the CUDA driver functions gpuos-trace probes (cuLaunchKernel, "
        "cuMemcpyHtoD_v2, cuStreamSynchronize...): is it the driver's libcuda.so?",
        library_path));
  }
  std::map<uint64_t, uint32_t> by_offset;
  for (uint32_t id = 0; id < GPUOS_CUDA_FN_COUNT; ++id) {
    auto it = offsets->find(kCudaFunctions[id].name);
    if (it != offsets->end()) by_offset.emplace(it->second, id);
  }
  return by_offset;
}

class CudaUprobesSourceImpl
    : public SkeletonSource<cuda_uprobes_bpf, cuda_uprobes_bpf__open_opts,
                            cuda_uprobes_bpf__destroy, CudaUprobesSource> {
 public:
  CudaUprobesSourceImpl() : SkeletonSource("cuda_uprobes") {}
  ~CudaUprobesSourceImpl() override {
    for (int fd : link_fds_) close(fd);
    for (bpf_link* link : links_) bpf_link__destroy(link);
  }
  absl::StatusOr<int> ProbeProcess(pid_t pid, const std::string& library_path) override;
  void TakeLinks(std::vector<bpf_link*>* links, std::vector<int>* link_fds) override {
    links->insert(links->end(), links_.begin(), links_.end());
    link_fds->insert(link_fds->end(), link_fds_.begin(), link_fds_.end());
    links_.clear();
    link_fds_.clear();
  }

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override {
    skel()->rodata->wakeup_bytes = setup.wakeup_bytes;
    multi_ = setup.options.cuda_uprobe_multi && KernelFiltersUprobeMultiByProcess();
    if (!multi_) return absl::OkStatus();
    for (bpf_program* prog : {skel()->progs.cuda_call_entry, skel()->progs.cuda_call_return}) {
      bpf_program__set_expected_attach_type(prog,
                                            static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
    }
    return absl::OkStatus();
  }
  absl::Status AttachMulti(pid_t pid, const std::string& path,
                           const std::map<uint64_t, uint32_t>& by_offset);
  absl::Status AttachEach(pid_t pid, const std::string& path,
                          const std::map<uint64_t, uint32_t>& by_offset);
  static absl::Status AttachError(pid_t pid, const std::string& path, const std::string& what,
                                  int err) {
    err = err < 0 ? -err : err;
    if (err == ESRCH) return absl::NotFoundError(absl::StrFormat("process %d is gone", pid));
    return BpfLoadError(
        absl::StrFormat("put uprobes on %s in %s for process %d", what, path, pid), err);
  }

  // uprobe_multi links (multi_) or one perf-event link per function, made
  // by hand per process, so the skeleton does not own them.
  bool multi_ = false;
  std::vector<int> link_fds_;
  std::vector<bpf_link*> links_;
};

absl::StatusOr<int> CudaUprobesSourceImpl::ProbeProcess(pid_t pid,
                                                       const std::string& library_path) {
  auto by_offset = FunctionsByOffset(library_path);
  if (!by_offset.ok()) return by_offset.status();
  absl::Status status = multi_ ? AttachMulti(pid, library_path, *by_offset)
                               : AttachEach(pid, library_path, *by_offset);
  if (!status.ok()) return status;
  return static_cast<int>(by_offset->size());
}

absl::Status CudaUprobesSourceImpl::AttachMulti(pid_t pid, const std::string& path,
                                                const std::map<uint64_t, uint32_t>& by_offset) {
  std::vector<uint64_t> offsets, cookies;
  for (const auto& [offset, id] : by_offset) {
    offsets.push_back(offset);
    cookies.push_back(GPUOS_CUDA_COOKIE(id, kCudaFunctions[id].args));
  }
  int entry =
      CreateUprobeMultiLink(skel()->progs.cuda_call_entry, path, offsets, cookies, false, pid);
  if (entry < 0) return AttachError(pid, path, "the CUDA driver functions", entry);
  int ret = CreateUprobeMultiLink(skel()->progs.cuda_call_return, path, offsets, cookies, true, pid);
  if (ret < 0) {
    close(entry);
    return AttachError(pid, path, "the CUDA driver functions' returns", ret);
  }
  link_fds_.push_back(entry);
  link_fds_.push_back(ret);
  return absl::OkStatus();
}

absl::Status CudaUprobesSourceImpl::AttachEach(pid_t pid, const std::string& path,
                                               const std::map<uint64_t, uint32_t>& by_offset) {
  std::vector<bpf_link*> links;
  for (const auto& [offset, id] : by_offset) {
    for (bool retprobe : {false, true}) {
      LIBBPF_OPTS(bpf_uprobe_opts, opts,
                  .bpf_cookie = GPUOS_CUDA_COOKIE(id, kCudaFunctions[id].args),
                  .retprobe = retprobe);
      bpf_program* prog = retprobe ? skel()->progs.cuda_call_return : skel()->progs.cuda_call_entry;
      bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid, path.c_str(), offset, &opts);
      if (!link) {
        int err = errno;
        for (bpf_link* done : links) bpf_link__destroy(done);
        return AttachError(pid, path, kCudaFunctions[id].name, err);
      }
      links.push_back(link);
    }
  }
  links_.insert(links_.end(), links.begin(), links.end());
  return absl::OkStatus();
}

bool DecodeCudaCall(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_cuda_call_event>(data, size);
  if (!e) return false;
  const char* name = CudaUprobeFunctionName(e->function);
  auto* c = event->mutable_cuda_api();
  c->set_duration_ns(e->duration_ns);
  // An id this agent does not know would be a kernel/agent mismatch; keep
  // the call, named by its id.
  c->set_name(name ? name : "cuda_uprobe_function_" + std::to_string(e->function));
  c->set_driver(true);
  c->set_from_uprobe(true);
  c->set_return_value(e->result);
  c->set_bytes(e->bytes);
  c->set_grid_x(e->grid[0]);
  c->set_grid_y(e->grid[1]);
  c->set_grid_z(e->grid[2]);
  c->set_block_x(e->block[0]);
  c->set_block_y(e->block[1]);
  c->set_block_z(e->block[2]);
  emit(*event);
  return true;
}

}  // namespace

std::unique_ptr<CudaUprobesSource> CudaUprobesSource::Create() {
  return std::make_unique<CudaUprobesSourceImpl>();
}

const char* CudaUprobeFunctionName(uint32_t function) {
  return function < GPUOS_CUDA_FN_COUNT ? kCudaFunctions[function].name : nullptr;
}

extern const BpfSourceModule kCudaUprobesSource = {
    "cuda_uprobes",
    {{GPUOS_EV_CUDA_CALL, "cuda_call", DecodeCudaCall}},
    {{GPUOS_MAP_CUDA_IN_FLIGHT, "cuda_in_flight"}},
    nullptr,  // BpfSession::AttachCudaUprobes loads it
};

}  // namespace gpuos
