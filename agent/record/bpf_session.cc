// Loading, attaching and reading gpuos-trace's BPF programs; see bpf_session.h.
#include "record/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/syscall_names.h"
#include "record/elf_function_offsets.h"
#include "bpf/cuda_uprobes.h"
#include "bpf/event_header.h"
#include "cuda_uprobes.skel.h"
#include "faults.skel.h"
#include "bpf/futex.h"
#include "proc.skel.h"
#include "offcpu.skel.h"
#include "bpf/syscalls.h"
#include "syscalls.skel.h"

namespace gpuos {
namespace {

// libbpf reports through a global print callback; keep its last lines so a
// failed load can say why, and echo them only when asked.
std::mutex g_libbpf_log_mu;
std::string g_libbpf_log;
bool g_libbpf_verbose = false;

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  vsnprintf(line, sizeof(line), format, args);
  std::lock_guard<std::mutex> lock(g_libbpf_log_mu);
  if (level != LIBBPF_DEBUG) {
    g_libbpf_log += line;
    if (g_libbpf_log.size() > 16384) g_libbpf_log.erase(0, g_libbpf_log.size() - 16384);
  }
  if (g_libbpf_verbose) fprintf(stderr, "libbpf: %s", line);
  return 0;
}

std::string LastLibbpfLines() {
  std::lock_guard<std::mutex> lock(g_libbpf_log_mu);
  // The last non-empty line is usually the reason.
  std::string log = g_libbpf_log;
  while (!log.empty() && log.back() == '\n') log.pop_back();
  size_t pos = log.rfind('\n');
  return pos == std::string::npos ? log : log.substr(pos + 1);
}

absl::Status LoadError(const char* what, int err) {
  err = err < 0 ? -err : err;
  if (err == EPERM || err == EACCES) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "the kernel refused to %s (%s): gpuos-trace needs CAP_BPF and CAP_PERFMON "
        "(or CAP_SYS_ADMIN); run it with sudo",
        what, strerror(err)));
  }
  std::string detail = LastLibbpfLines();
  return absl::InternalError(absl::StrFormat("cannot %s: %s%s%s", what, strerror(err),
                                             detail.empty() ? "" : "; libbpf: ", detail));
}

// Entries of the tid_slots array (bpf/syscalls.h) that cover every thread
// id up to pid_max; threads with higher ids (pid_max raised later) keep
// their syscall state in thread_state.
uint32_t TidSlotEntries() {
  uint64_t pid_max = GPUOS_PID_LIMIT;
  std::ifstream in("/proc/sys/kernel/pid_max");
  uint64_t read = 0;
  if (in >> read && read > 0 && read < pid_max) pid_max = read;
  return static_cast<uint32_t>((pid_max + GPUOS_TIDS_PER_ENTRY - 1) / GPUOS_TIDS_PER_ENTRY);
}

// Points an object's copy of a shared map at the one already created.
absl::Status Reuse(struct bpf_map* map, int fd) {
  int err = bpf_map__reuse_fd(map, fd);
  if (err) return LoadError(absl::StrCat("share map ", bpf_map__name(map)).c_str(), err);
  return absl::OkStatus();
}

template <typename Skel>
absl::Status ShareCommonMaps(Skel* skel, const proc_bpf* owner) {
  for (auto [mine, theirs] : {std::pair{skel->maps.traced_tgids, owner->maps.traced_tgids},
                              std::pair{skel->maps.events, owner->maps.events},
                              std::pair{skel->maps.drop_counts, owner->maps.drop_counts},
                              std::pair{skel->maps.thread_state, owner->maps.thread_state},
                              std::pair{skel->maps.syscall_slots, owner->maps.syscall_slots},
                              std::pair{skel->maps.tid_slots, owner->maps.tid_slots}}) {
    absl::Status status = Reuse(mine, bpf_map__fd(theirs));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void SetEntries(struct bpf_map* map, uint32_t entries) { bpf_map__set_max_entries(map, entries); }

const char* MapName(uint32_t id) {
  switch (id) {
    case GPUOS_MAP_TRACKED: return "traced_tgids";
    // thread_state's failed creations are counted under this id (common.bpf.h).
    case GPUOS_MAP_SYSCALL_IN_FLIGHT: return "thread_state";
    case GPUOS_MAP_SYSCALL_STATS: return "syscall_stats";
    case GPUOS_MAP_SCHED_STATE: return "sched_state";
    case GPUOS_MAP_FAULT_STATE: return "fault_state";
    case GPUOS_MAP_MM_IN_FLIGHT: return "mm_in_flight";
    case GPUOS_MAP_FUTEX_IN_FLIGHT: return "futex_in_flight";
    case GPUOS_MAP_FUTEX_WAKES: return "futex_wakes";
    case GPUOS_MAP_CUDA_IN_FLIGHT: return "cuda_in_flight";
    case GPUOS_MAP_TORCH_IN_FLIGHT: return "torch_in_flight";
  }
  return "unknown";
}

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

}  // namespace

const char* EventKindName(uint32_t kind) {
  switch (kind) {
    case GPUOS_EV_PROCESS_START: return "process_start";
    case GPUOS_EV_THREAD_START: return "thread_start";
    case GPUOS_EV_EXEC: return "exec";
    case GPUOS_EV_COMM_CHANGE: return "comm_change";
    case GPUOS_EV_THREAD_EXIT: return "thread_exit";
    case GPUOS_EV_PROCESS_EXIT: return "process_exit";
    case GPUOS_EV_OFF_CPU: return "off_cpu";
    case GPUOS_EV_PAGE_FAULTS: return "page_faults";
    case GPUOS_EV_MMAP: return "mmap";
    case GPUOS_EV_MUNMAP: return "munmap";
    case GPUOS_EV_FUTEX_WAIT: return "futex_wait";
    case GPUOS_EV_CUDA_CALL: return "cuda_call";
    case GPUOS_EV_MM_CALLS: return "mm_calls";
    case GPUOS_EV_TORCH_BACKWARD: return "torch_backward";
  }
  return "unknown";
}

namespace {

// Closes links all at once.  Closing a tracepoint link waits for a kernel
// grace period (35-90 ms each on the development VM), so closed one after
// another the dozen links of a recording made every recording end about
// 0.4 s after its command; closed together, the waits overlap.  Takes the
// skeletons' links (left null) and any others.
void DestroyLinksTogether(std::initializer_list<const bpf_object_skeleton*> skeletons,
                          std::vector<bpf_link*>* others) {
  std::vector<bpf_link*> links;
  for (const bpf_object_skeleton* s : skeletons) {
    if (!s) continue;
    for (int i = 0; i < s->prog_cnt; ++i) {
      const auto* prog = reinterpret_cast<const bpf_prog_skeleton*>(
          reinterpret_cast<const char*>(s->progs) + static_cast<size_t>(i) * s->prog_skel_sz);
      if (prog->link && *prog->link) {
        links.push_back(*prog->link);
        *prog->link = nullptr;
      }
    }
  }
  links.insert(links.end(), others->begin(), others->end());
  others->clear();
  std::vector<std::thread> closers;
  closers.reserve(links.size());
  for (bpf_link* link : links) {
    try {
      closers.emplace_back([link] { bpf_link__destroy(link); });
    } catch (const std::system_error&) {
      bpf_link__destroy(link);  // no thread to be had: close it here
    }
  }
  for (std::thread& t : closers) t.join();
}

}  // namespace

struct BpfSession::Impl {
  RecordHandler handler;
  BpfSessionOptions options;
  proc_bpf* proc = nullptr;
  offcpu_bpf* sched = nullptr;
  faults_bpf* faults = nullptr;
  syscalls_bpf* syscalls = nullptr;
  // The kernel's syscall_slots array (bpf/syscalls.h), mapped read-only.
  const uint8_t* slots = nullptr;
  size_t slots_bytes = 0;
  uint32_t slot_count = 0;
  int32_t nr_futex = -1;
  int32_t nr_futex_wake = -1;
  // Loaded by the first AttachCudaUprobes(); its links are attached by
  // hand, per process, so the skeleton does not own them: uprobe_multi
  // links (cuda_multi) or one perf-event link per function.
  cuda_uprobes_bpf* cuda = nullptr;
  bool cuda_multi = false;
  std::vector<int> cuda_link_fds;
  std::vector<bpf_link*> cuda_links;
  std::set<pid_t> cuda_pids;
  ring_buffer* ring = nullptr;
  // traced_tgids (bpf/common.bpf.h), mapped writable: the agent sets its
  // bits with atomic ORs, as the kernel side does.
  uint64_t* traced_tgids = nullptr;
  size_t traced_tgids_bytes = 0;

  ~Impl() {
    // Freeing the ring buffer first: no callback may run into a dead handler.
    if (ring) ring_buffer__free(ring);
    DetachAll();
    if (slots) munmap(const_cast<uint8_t*>(slots), slots_bytes);
    if (traced_tgids) munmap(traced_tgids, traced_tgids_bytes);
    if (cuda) cuda_uprobes_bpf__destroy(cuda);
    if (syscalls) syscalls_bpf__destroy(syscalls);
    if (faults) faults_bpf__destroy(faults);
    if (sched) offcpu_bpf__destroy(sched);
    if (proc) proc_bpf__destroy(proc);
  }

  // Every program's link, the skeletons' and the CUDA uprobes'.
  void DetachAll() {
    for (int fd : cuda_link_fds) close(fd);
    cuda_link_fds.clear();
    DestroyLinksTogether({syscalls ? syscalls->skeleton : nullptr, proc ? proc->skeleton : nullptr,
                          sched ? sched->skeleton : nullptr, faults ? faults->skeleton : nullptr,
                          cuda ? cuda->skeleton : nullptr},
                         &cuda_links);
  }

  static int OnRecord(void* ctx, void* data, size_t size) {
    static_cast<Impl*>(ctx)->handler(data, size);
    return 0;
  }
};

namespace {

// Bytes of one element of a BPF array map: values are 8-byte aligned.
constexpr size_t kSlotStride = (sizeof(gpuos_syscall_slot) + 7) & ~size_t{7};

}  // namespace

// Hands every slot of syscall_slots to the kernel side's free list and maps
// the array for reading.
absl::Status BpfSession::MapSyscallSlots(Impl* impl) {
  int queue = bpf_map__fd(impl->syscalls->maps.free_syscall_slots);
  for (uint32_t i = 0; i < impl->slot_count; ++i) {
    if (bpf_map_update_elem(queue, nullptr, &i, BPF_ANY)) return LoadError("set up the BPF maps", errno);
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t entries = bpf_map__max_entries(impl->syscalls->maps.syscall_slots);
  impl->slots_bytes = (entries * kSlotStride + page - 1) / page * page;
  void* map = mmap(nullptr, impl->slots_bytes, PROT_READ, MAP_SHARED,
                   bpf_map__fd(impl->syscalls->maps.syscall_slots), 0);
  if (map == MAP_FAILED) return LoadError("map the syscall slots", errno);
  impl->slots = static_cast<const uint8_t*>(map);
  return absl::OkStatus();
}

BpfSession::BpfSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpfSession::~BpfSession() = default;

absl::StatusOr<std::unique_ptr<BpfSession>> BpfSession::Start(const BpfSessionOptions& options,
                                                              RecordHandler handler) {
  uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t rb = options.ring_buffer_bytes;
  if (rb < page || (rb & (rb - 1)) != 0 || rb > (1ull << 31)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring buffer size %d is not a power of two between %d and 2 GiB", rb, page));
  }
  {
    std::lock_guard<std::mutex> lock(g_libbpf_log_mu);
    g_libbpf_verbose = options.verbose;
    g_libbpf_log.clear();
  }
  libbpf_set_print(LibbpfPrint);

  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  impl->options = options;

  LIBBPF_OPTS(bpf_object_open_opts, open_opts);
  if (!options.btf_path.empty()) open_opts.btf_custom_path = options.btf_path.c_str();

  // Open every object first: configuration happens before any load.
  impl->proc = proc_bpf__open_opts(&open_opts);
  impl->sched = offcpu_bpf__open_opts(&open_opts);
  impl->faults = faults_bpf__open_opts(&open_opts);
  impl->syscalls = syscalls_bpf__open_opts(&open_opts);
  if (!impl->proc || !impl->sched || !impl->faults || !impl->syscalls) {
    return LoadError("open the BPF objects", errno);
  }

  // Sizes and settings the verifier should see.
  SetEntries(impl->proc->maps.events, static_cast<uint32_t>(rb));
  // A map needs one entry; with none wanted the free list stays empty.
  impl->slot_count = options.syscall_slots;
  SetEntries(impl->proc->maps.syscall_slots, std::max<uint32_t>(options.syscall_slots, 1));
  SetEntries(impl->proc->maps.tid_slots, TidSlotEntries());
  SetEntries(impl->syscalls->maps.free_syscall_slots, std::max<uint32_t>(options.syscall_slots, 1));
  impl->faults->rodata->fault_window_ns = options.fault_window_ns;
  // Wake the agent when an eighth of the ring is used (it also drains on
  // its own timer), so a burst never fills the ring between two drains.
  const uint64_t wakeup = rb / 8;
  impl->proc->rodata->wakeup_bytes = wakeup;
  impl->sched->rodata->wakeup_bytes = wakeup;
  impl->faults->rodata->wakeup_bytes = wakeup;
  impl->syscalls->rodata->wakeup_bytes = wakeup;
  // Syscall numbers the off-CPU program names blocking causes by, and the
  // syscall programs pick mmap/munmap/futex calls out by.
  auto set_numbers = [](auto* rodata) {
    rodata->nr_futex = SyscallNumber("futex");
    rodata->nr_futex_waitv = SyscallNumber("futex_waitv");
    rodata->nr_futex_wait = SyscallNumber("futex_wait");
    rodata->nr_futex_wake = SyscallNumber("futex_wake");
  };
  set_numbers(impl->sched->rodata);
  set_numbers(impl->syscalls->rodata);
  impl->nr_futex = impl->syscalls->rodata->nr_futex;
  impl->nr_futex_wake = impl->syscalls->rodata->nr_futex_wake;
  impl->syscalls->rodata->nr_mmap = SyscallNumber("mmap");
  impl->syscalls->rodata->nr_munmap = SyscallNumber("munmap");

  int err = proc_bpf__load(impl->proc);
  if (err) return LoadError("load the BPF programs", err);
  {
    const size_t bytes = bpf_map__max_entries(impl->proc->maps.traced_tgids) * sizeof(uint64_t);
    void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                     bpf_map__fd(impl->proc->maps.traced_tgids), 0);
    if (map == MAP_FAILED) return LoadError("map the traced process set", errno);
    impl->traced_tgids = static_cast<uint64_t*>(map);
    impl->traced_tgids_bytes = bytes;
  }
  for (absl::Status status : {ShareCommonMaps(impl->sched, impl->proc),
                              ShareCommonMaps(impl->faults, impl->proc),
                              ShareCommonMaps(impl->syscalls, impl->proc)}) {
    if (!status.ok()) return status;
  }
  if ((err = offcpu_bpf__load(impl->sched)) || (err = faults_bpf__load(impl->faults)) ||
      (err = syscalls_bpf__load(impl->syscalls))) {
    return LoadError("load the BPF programs", err);
  }

  if (absl::Status status = MapSyscallSlots(impl.get()); !status.ok()) return status;

  impl->ring = ring_buffer__new(bpf_map__fd(impl->proc->maps.events), &Impl::OnRecord,
                                impl.get(), nullptr);
  if (!impl->ring) return LoadError("open the BPF ring buffer", errno);

  // Attach last, in dependency order: the programs that keep per-thread
  // state run before the ones that read it, and the syscall programs'
  // exit handler moves a thread's totals out of its slot before the
  // process program tells the agent of the exit (bpf/syscalls.bpf.c).
  if ((err = syscalls_bpf__attach(impl->syscalls)) || (err = proc_bpf__attach(impl->proc)) ||
      (err = offcpu_bpf__attach(impl->sched)) || (err = faults_bpf__attach(impl->faults))) {
    return LoadError("attach the BPF programs to their tracepoints", err);
  }
  return std::unique_ptr<BpfSession>(new BpfSession(std::move(impl)));
}

absl::Status BpfSession::Track(uint32_t pid) {
  if (static_cast<size_t>(pid / 64) * sizeof(uint64_t) >= impl_->traced_tgids_bytes) {
    return absl::InternalError(
        absl::StrFormat("cannot track pid %d: beyond the kernel's pid limit", pid));
  }
  // Seen by every program at its next event (bpf/common.bpf.h, is_tracked).
  uint64_t* word = &impl_->traced_tgids[pid / 64];
  const uint64_t bit = uint64_t{1} << (pid % 64);
  __atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
  // A process that ended before the bit was set would leave it set for the
  // next process given its id (the kernel side clears bits at exits).
  // One that ends after this check has its bit cleared by its exit.
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    __atomic_fetch_and(word, ~bit, __ATOMIC_SEQ_CST);
    return absl::NotFoundError(absl::StrFormat("cannot track pid %d: no such process", pid));
  }
  return absl::OkStatus();
}

absl::Status BpfSession::ShareMapsWith(struct bpf_object* obj) const {
  for (struct bpf_map* theirs : {impl_->proc->maps.traced_tgids, impl_->proc->maps.events,
                                 impl_->proc->maps.drop_counts, impl_->proc->maps.thread_state,
                                 impl_->proc->maps.syscall_slots, impl_->proc->maps.tid_slots}) {
    struct bpf_map* mine = bpf_object__find_map_by_name(obj, bpf_map__name(theirs));
    if (!mine) continue;
    absl::Status status = Reuse(mine, bpf_map__fd(theirs));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

const BpfSessionOptions& BpfSession::options() const { return impl_->options; }

int BpfSession::ring_buffer_fd() const { return ring_buffer__epoll_fd(impl_->ring); }

absl::StatusOr<int> BpfSession::Consume() {
  int n = ring_buffer__consume(impl_->ring);
  if (n < 0 && n != -EINTR) {
    return absl::InternalError(absl::StrCat("reading the BPF ring buffer: ", strerror(-n)));
  }
  return n < 0 ? 0 : n;
}

KernelSyscallTables BpfSession::ReadSyscallTables() const {
  // Futex wake calls sit under GPUOS_WAKE_STATS_NR(nr) (bpf/syscalls.h): they
  // go back into their syscall's totals, and make the thread's wake counts
  // (one thread may wake through futex and futex_wake: summed).
  std::map<std::pair<uint32_t, int32_t>, KernelSyscallTotal> totals;
  std::map<uint32_t, KernelFutexWakes> wakes;
  // One (thread, syscall) total from either table; `woken` counts only for
  // a futex wake entry.
  auto add = [&totals, &wakes](uint32_t tid, uint32_t pid, int32_t nr, bool wake, uint64_t calls,
                               uint64_t total_ns, uint64_t max_ns, uint64_t woken) {
    KernelSyscallTotal& total = totals[{tid, nr}];
    total.pid = pid;
    total.tid = tid;
    total.nr = nr;
    total.calls += calls;
    total.total_ns += total_ns;
    total.max_ns = std::max(total.max_ns, max_ns);
    if (wake) {
      KernelFutexWakes& w = wakes[tid];
      w.pid = pid;
      w.tid = tid;
      w.calls += calls;
      w.woken += woken;
    }
  };
  int fd = bpf_map__fd(impl_->syscalls->maps.syscall_stats);
  gpuos_syscall_key key{}, next{};
  gpuos_syscall_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    gpuos_syscall_stats stats{};
    if (bpf_map_lookup_elem(fd, &key, &stats) != 0) continue;
    const bool wake = GPUOS_IS_WAKE_STATS_NR(key.nr);
    const int32_t nr = wake ? GPUOS_SYSCALL_OF_WAKE_STATS_NR(key.nr) : key.nr;
    add(key.tid, stats.pid, nr, wake, stats.calls, stats.total_ns, stats.max_ns, stats.woken);
  }
  // The slots after syscall_stats: a thread's exit moves its totals there
  // after marking its slot free, so a walk in this order may miss a thread
  // that exits meanwhile (until the next walk) but never counts it twice.
  // Each slot is read between two reads of its seq, which is odd while a
  // thread owns it; a slot taken or freed meanwhile is skipped.
  std::vector<std::pair<uint32_t, gpuos_slot_entry>> entries;
  for (uint32_t i = 0; i < impl_->slot_count; ++i) {
    const auto* slot = reinterpret_cast<const gpuos_syscall_slot*>(impl_->slots + i * kSlotStride);
    const uint64_t seq = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
    if (seq % 2 == 0) continue;
    const uint32_t tid = slot->tid, pid = slot->pid;
    const uint64_t woken[2] = {slot->woken[0], slot->woken[1]};
    entries.clear();
    for (uint32_t e = 0; e < GPUOS_SLOT_ENTRIES; ++e) {
      gpuos_slot_entry entry;
      std::memcpy(&entry, &slot->entries[e], sizeof(entry));
      if (entry.calls) entries.emplace_back(e, entry);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) != seq) continue;
    for (const auto& [e, entry] : entries) {
      const bool wake = e >= GPUOS_SLOT_NRS;
      const int32_t nr = !wake ? static_cast<int32_t>(e)
                         : e == GPUOS_SLOT_WAKE_FUTEX ? impl_->nr_futex
                                                      : impl_->nr_futex_wake;
      add(tid, pid, nr, wake, entry.calls, entry.total_ns, entry.max_ns,
          wake ? woken[e - GPUOS_SLOT_NRS] : 0);
    }
  }

  KernelSyscallTables out;
  out.totals.reserve(totals.size());
  for (const auto& [k, total] : totals) out.totals.push_back(total);
  out.wakes.reserve(wakes.size());
  for (const auto& [tid, w] : wakes) out.wakes.push_back(w);
  return out;
}

void BpfSession::DetachAndDrain() {
  impl_->DetachAll();
  auto slot_at = [this](uint32_t i) {
    return reinterpret_cast<const gpuos_syscall_slot*>(impl_->slots + i * kSlotStride);
  };
  bool held = false;  // by a thread that lives on; none once a launched tree has ended
  for (uint32_t i = 0; i < impl_->slot_count && !held; ++i) {
    held = __atomic_load_n(&slot_at(i)->seq, __ATOMIC_ACQUIRE) % 2 == 1;
  }
  // A detached program may still be finishing a run on another CPU (the
  // kernel frees the tracepoint's old probe list after a grace period, it
  // does not wait for it); runs last microseconds.
  if (held) usleep(20'000);
  Consume().IgnoreError();
  for (uint32_t i = 0; i < impl_->slot_count && held; ++i) {
    const gpuos_syscall_slot* slot = slot_at(i);
    if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) % 2 == 0) continue;
    const gpuos_mm_calls_event& batch = slot->mm_batch;
    if (batch.count == 0 || batch.count > GPUOS_MM_BATCH) continue;
    // The kernel side fills the header when it sends a batch.
    gpuos_mm_calls_event record;
    std::memcpy(&record, &batch, sizeof(record));
    record.hdr.pid = slot->pid;
    record.hdr.tid = slot->tid;
    record.hdr.kind = GPUOS_EV_MM_CALLS;
    impl_->handler(&record, offsetof(gpuos_mm_calls_event, calls) +
                                record.count * sizeof(gpuos_mm_record));
  }
}

KernelDrops BpfSession::ReadDrops() const {
  KernelDrops drops;
  int fd = bpf_map__fd(impl_->proc->maps.drop_counts);
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return drops;
  std::vector<uint64_t> values(static_cast<size_t>(cpus));
  for (uint32_t slot = 0; slot < GPUOS_DROP_SLOTS; ++slot) {
    if (bpf_map_lookup_elem(fd, &slot, values.data()) != 0) continue;
    uint64_t sum = 0;
    for (uint64_t v : values) sum += v;
    if (sum == 0) continue;
    std::string reason = slot < GPUOS_DROP_MAP_FULL_BASE
                             ? absl::StrCat("ringbuf:", EventKindName(slot))
                             : absl::StrCat("map_full:", MapName(slot - GPUOS_DROP_MAP_FULL_BASE));
    drops.by_reason.emplace_back(reason, sum);
    drops.total += sum;
  }
  return drops;
}

std::vector<std::pair<std::string, uint64_t>> BpfSession::ReadRecursionMisses() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::vector<struct bpf_object*> objects = {impl_->proc->obj,  impl_->sched->obj,
                                             impl_->faults->obj, impl_->syscalls->obj};
  if (impl_->cuda) objects.push_back(impl_->cuda->obj);
  for (struct bpf_object* obj : objects) {
    struct bpf_program* prog;
    bpf_object__for_each_program(prog, obj) {
      int fd = bpf_program__fd(prog);
      if (fd < 0) continue;
      struct bpf_prog_info info {};
      uint32_t len = sizeof(info);
      if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.recursion_misses) {
        out.emplace_back(bpf_program__name(prog), info.recursion_misses);
      }
    }
  }
  return out;
}

void BpfSession::ForgetThreads(const std::vector<uint32_t>& tids) {
  int stats_fd = bpf_map__fd(impl_->syscalls->maps.syscall_stats);
  // Syscall totals (futex wake counts among them) are keyed by (tid, nr):
  // collect the keys first, since deleting while iterating restarts the walk.
  std::vector<gpuos_syscall_key> doomed;
  gpuos_syscall_key key{}, next{};
  gpuos_syscall_key* prev = nullptr;
  std::vector<uint32_t> sorted(tids);
  std::sort(sorted.begin(), sorted.end());
  while (bpf_map_get_next_key(stats_fd, prev, &next) == 0) {
    if (std::binary_search(sorted.begin(), sorted.end(), next.tid)) doomed.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : doomed) bpf_map_delete_elem(stats_fd, &k);
}

absl::StatusOr<int> BpfSession::AttachCudaUprobes(pid_t pid, const std::string& library_path) {
  if (pid <= 0) {
    // libbpf reads 0 as "this process" and -1 as "every process".
    return absl::InvalidArgumentError(absl::StrFormat("no process %d to probe", pid));
  }
  if (impl_->cuda_pids.count(pid)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("process %d already has CUDA uprobes in this session", pid));
  }
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

  if (!impl_->cuda) {
    LIBBPF_OPTS(bpf_object_open_opts, open_opts);
    if (!impl_->options.btf_path.empty()) {
      open_opts.btf_custom_path = impl_->options.btf_path.c_str();
    }
    cuda_uprobes_bpf* cuda = cuda_uprobes_bpf__open_opts(&open_opts);
    if (!cuda) return LoadError("open the CUDA uprobe BPF object", errno);
    cuda->rodata->wakeup_bytes = impl_->options.ring_buffer_bytes / 8;
    const bool multi = impl_->options.cuda_uprobe_multi && KernelFiltersUprobeMultiByProcess();
    if (multi) {
      for (bpf_program* prog : {cuda->progs.cuda_call_entry, cuda->progs.cuda_call_return}) {
        bpf_program__set_expected_attach_type(prog,
                                              static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
      }
    }
    absl::Status shared = ShareCommonMaps(cuda, impl_->proc);
    int err = shared.ok() ? cuda_uprobes_bpf__load(cuda) : 0;
    if (!shared.ok() || err) {
      cuda_uprobes_bpf__destroy(cuda);
      return shared.ok() ? LoadError("load the CUDA uprobe BPF programs", err) : shared;
    }
    impl_->cuda = cuda;
    impl_->cuda_multi = multi;
  }

  // One probe per address: where the library gives two listed names to one
  // function, both would fire on every call.
  std::map<uint64_t, uint32_t> by_offset;
  for (uint32_t id = 0; id < GPUOS_CUDA_FN_COUNT; ++id) {
    auto it = offsets->find(kCudaFunctions[id].name);
    if (it != offsets->end()) by_offset.emplace(it->second, id);
  }
  auto attach_error = [&](const std::string& what, int err) {
    err = err < 0 ? -err : err;
    if (err == ESRCH) return absl::NotFoundError(absl::StrFormat("process %d is gone", pid));
    return LoadError(absl::StrFormat("put uprobes on %s in %s for process %d", what,
                                     library_path, pid)
                         .c_str(),
                     err);
  };
  if (impl_->cuda_multi) {
    std::vector<uint64_t> probe_offsets, cookies;
    for (const auto& [offset, id] : by_offset) {
      probe_offsets.push_back(offset);
      cookies.push_back(GPUOS_CUDA_COOKIE(id, kCudaFunctions[id].args));
    }
    int entry = CreateUprobeMultiLink(impl_->cuda->progs.cuda_call_entry, library_path,
                                      probe_offsets, cookies, false, pid);
    if (entry < 0) return attach_error("the CUDA driver functions", entry);
    int ret = CreateUprobeMultiLink(impl_->cuda->progs.cuda_call_return, library_path,
                                    probe_offsets, cookies, true, pid);
    if (ret < 0) {
      close(entry);
      return attach_error("the CUDA driver functions' returns", ret);
    }
    impl_->cuda_link_fds.push_back(entry);
    impl_->cuda_link_fds.push_back(ret);
  } else {
    std::vector<bpf_link*> links;
    for (const auto& [offset, id] : by_offset) {
      for (bool retprobe : {false, true}) {
        LIBBPF_OPTS(bpf_uprobe_opts, opts,
                    .bpf_cookie = GPUOS_CUDA_COOKIE(id, kCudaFunctions[id].args),
                    .retprobe = retprobe);
        bpf_program* prog =
            retprobe ? impl_->cuda->progs.cuda_call_return : impl_->cuda->progs.cuda_call_entry;
        bpf_link* link =
            bpf_program__attach_uprobe_opts(prog, pid, library_path.c_str(), offset, &opts);
        if (!link) {
          int err = errno;
          for (bpf_link* done : links) bpf_link__destroy(done);
          return attach_error(kCudaFunctions[id].name, err);
        }
        links.push_back(link);
      }
    }
    impl_->cuda_links.insert(impl_->cuda_links.end(), links.begin(), links.end());
  }
  impl_->cuda_pids.insert(pid);
  return static_cast<int>(by_offset.size());
}

}  // namespace gpuos
