// Loading, attaching and reading gpuos-trace's BPF programs; see bpf_session.h.
#include "record/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/syscall_names.h"
#include "bpf/event_header.h"
#include "faults.skel.h"
#include "bpf/futex.h"
#include "futex.skel.h"
#include "mm.skel.h"
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

bool TracepointExists(const char* category, const char* name) {
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    std::string path = absl::StrCat(root, "/events/", category, "/", name, "/id");
    if (access(path.c_str(), F_OK) == 0) return true;
  }
  return false;
}

// Points an object's copy of a shared map at the one already created.
absl::Status Reuse(struct bpf_map* map, int fd) {
  int err = bpf_map__reuse_fd(map, fd);
  if (err) return LoadError(absl::StrCat("share map ", bpf_map__name(map)).c_str(), err);
  return absl::OkStatus();
}

template <typename Skel>
absl::Status ShareCommonMaps(Skel* skel, const proc_bpf* owner) {
  for (auto [mine, theirs] : {std::pair{skel->maps.tracked_pids, owner->maps.tracked_pids},
                              std::pair{skel->maps.events, owner->maps.events},
                              std::pair{skel->maps.drop_counts, owner->maps.drop_counts},
                              std::pair{skel->maps.syscall_in_flight, owner->maps.syscall_in_flight}}) {
    absl::Status status = Reuse(mine, bpf_map__fd(theirs));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void SetEntries(struct bpf_map* map, uint32_t entries) { bpf_map__set_max_entries(map, entries); }

const char* MapName(uint32_t id) {
  switch (id) {
    case GPUOS_MAP_TRACKED: return "tracked_pids";
    case GPUOS_MAP_SYSCALL_IN_FLIGHT: return "syscall_in_flight";
    case GPUOS_MAP_SYSCALL_STATS: return "syscall_stats";
    case GPUOS_MAP_SCHED_STATE: return "sched_state";
    case GPUOS_MAP_FAULT_STATE: return "fault_state";
    case GPUOS_MAP_MM_IN_FLIGHT: return "mm_in_flight";
    case GPUOS_MAP_FUTEX_IN_FLIGHT: return "futex_in_flight";
    case GPUOS_MAP_FUTEX_WAKES: return "futex_wakes";
  }
  return "unknown";
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
  }
  return "unknown";
}

struct BpfSession::Impl {
  RecordHandler handler;
  proc_bpf* proc = nullptr;
  offcpu_bpf* sched = nullptr;
  faults_bpf* faults = nullptr;
  mm_bpf* mm = nullptr;
  futex_bpf* futex = nullptr;
  syscalls_bpf* syscalls = nullptr;
  ring_buffer* ring = nullptr;

  ~Impl() {
    // Freeing the ring buffer first: no callback may run into a dead handler.
    if (ring) ring_buffer__free(ring);
    if (syscalls) syscalls_bpf__destroy(syscalls);
    if (futex) futex_bpf__destroy(futex);
    if (mm) mm_bpf__destroy(mm);
    if (faults) faults_bpf__destroy(faults);
    if (sched) offcpu_bpf__destroy(sched);
    if (proc) proc_bpf__destroy(proc);
  }

  static int OnRecord(void* ctx, void* data, size_t size) {
    static_cast<Impl*>(ctx)->handler(data, size);
    return 0;
  }
};

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

  LIBBPF_OPTS(bpf_object_open_opts, open_opts);
  if (!options.btf_path.empty()) open_opts.btf_custom_path = options.btf_path.c_str();

  // Open every object first: configuration happens before any load.
  impl->proc = proc_bpf__open_opts(&open_opts);
  impl->sched = offcpu_bpf__open_opts(&open_opts);
  impl->faults = faults_bpf__open_opts(&open_opts);
  impl->mm = mm_bpf__open_opts(&open_opts);
  impl->futex = futex_bpf__open_opts(&open_opts);
  impl->syscalls = syscalls_bpf__open_opts(&open_opts);
  if (!impl->proc || !impl->sched || !impl->faults || !impl->mm || !impl->futex ||
      !impl->syscalls) {
    return LoadError("open the BPF objects", errno);
  }

  // Sizes and settings the verifier should see.
  SetEntries(impl->proc->maps.events, static_cast<uint32_t>(rb));
  SetEntries(impl->proc->maps.tracked_pids, options.max_processes);
  SetEntries(impl->proc->maps.syscall_in_flight, options.max_threads);
  SetEntries(impl->sched->maps.sched_state, options.max_threads);
  SetEntries(impl->faults->maps.fault_state, options.max_threads);
  SetEntries(impl->mm->maps.mm_in_flight, options.max_threads);
  SetEntries(impl->futex->maps.futex_in_flight, options.max_threads);
  SetEntries(impl->futex->maps.futex_wakes, options.max_threads);
  impl->faults->rodata->fault_window_ns = options.fault_window_ns;
  // Wake the agent when an eighth of the ring is used (it also drains on
  // its own timer), so a burst never fills the ring between two drains.
  const uint64_t wakeup = rb / 8;
  impl->proc->rodata->wakeup_bytes = wakeup;
  impl->sched->rodata->wakeup_bytes = wakeup;
  impl->faults->rodata->wakeup_bytes = wakeup;
  impl->mm->rodata->wakeup_bytes = wakeup;
  impl->futex->rodata->wakeup_bytes = wakeup;
  // Syscall numbers the off-CPU program names blocking causes by.
  auto set_numbers = [](auto* rodata) {
    rodata->nr_futex = SyscallNumber("futex");
    rodata->nr_futex_waitv = SyscallNumber("futex_waitv");
    rodata->nr_futex_wait = SyscallNumber("futex_wait");
    rodata->nr_futex_wake = SyscallNumber("futex_wake");
  };
  set_numbers(impl->sched->rodata);

  // Programs for tracepoints this kernel lacks are left out, not fatal.
  struct Optional {
    struct bpf_program* prog;
    const char* category;
    const char* name;
  };
  for (const Optional& opt : {
           Optional{impl->futex->progs.handle_enter_futex_waitv, "syscalls", "sys_enter_futex_waitv"},
           Optional{impl->futex->progs.handle_exit_futex_waitv, "syscalls", "sys_exit_futex_waitv"},
           Optional{impl->futex->progs.handle_enter_futex2_wait, "syscalls", "sys_enter_futex_wait"},
           Optional{impl->futex->progs.handle_exit_futex2_wait, "syscalls", "sys_exit_futex_wait"},
           Optional{impl->futex->progs.handle_enter_futex2_wake, "syscalls", "sys_enter_futex_wake"},
           Optional{impl->futex->progs.handle_exit_futex2_wake, "syscalls", "sys_exit_futex_wake"},
       }) {
    if (!TracepointExists(opt.category, opt.name)) bpf_program__set_autoload(opt.prog, false);
  }

  int err = proc_bpf__load(impl->proc);
  if (err) return LoadError("load the BPF programs", err);
  for (absl::Status status : {ShareCommonMaps(impl->sched, impl->proc),
                              ShareCommonMaps(impl->faults, impl->proc),
                              ShareCommonMaps(impl->mm, impl->proc),
                              ShareCommonMaps(impl->futex, impl->proc),
                              ShareCommonMaps(impl->syscalls, impl->proc)}) {
    if (!status.ok()) return status;
  }
  if ((err = offcpu_bpf__load(impl->sched)) || (err = faults_bpf__load(impl->faults)) ||
      (err = mm_bpf__load(impl->mm)) || (err = futex_bpf__load(impl->futex)) ||
      (err = syscalls_bpf__load(impl->syscalls))) {
    return LoadError("load the BPF programs", err);
  }

  impl->ring = ring_buffer__new(bpf_map__fd(impl->proc->maps.events), &Impl::OnRecord,
                                impl.get(), nullptr);
  if (!impl->ring) return LoadError("open the BPF ring buffer", errno);

  // Attach last, in dependency order: the programs that keep per-thread
  // state run before the ones that read it.
  if ((err = proc_bpf__attach(impl->proc)) || (err = syscalls_bpf__attach(impl->syscalls)) ||
      (err = offcpu_bpf__attach(impl->sched)) || (err = faults_bpf__attach(impl->faults)) ||
      (err = mm_bpf__attach(impl->mm)) || (err = futex_bpf__attach(impl->futex))) {
    return LoadError("attach the BPF programs to their tracepoints", err);
  }
  return std::unique_ptr<BpfSession>(new BpfSession(std::move(impl)));
}

absl::Status BpfSession::Track(uint32_t pid) {
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(impl_->proc->maps.tracked_pids), &pid, &one, BPF_ANY)) {
    return absl::InternalError(absl::StrFormat("cannot track pid %d: %s", pid, strerror(errno)));
  }
  return absl::OkStatus();
}

int BpfSession::ring_buffer_fd() const { return ring_buffer__epoll_fd(impl_->ring); }

absl::StatusOr<int> BpfSession::Consume() {
  int n = ring_buffer__consume(impl_->ring);
  if (n < 0 && n != -EINTR) {
    return absl::InternalError(absl::StrCat("reading the BPF ring buffer: ", strerror(-n)));
  }
  return n < 0 ? 0 : n;
}

std::vector<KernelSyscallTotal> BpfSession::ReadSyscallTotals() const {
  std::vector<KernelSyscallTotal> out;
  int fd = bpf_map__fd(impl_->syscalls->maps.syscall_stats);
  gpuos_syscall_key key{}, next{};
  gpuos_syscall_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    gpuos_syscall_stats stats{};
    if (bpf_map_lookup_elem(fd, &next, &stats) == 0) {
      out.push_back({stats.pid, next.tid, next.nr, stats.calls, stats.total_ns, stats.max_ns});
    }
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<KernelFutexWakes> BpfSession::ReadFutexWakes() const {
  std::vector<KernelFutexWakes> out;
  int fd = bpf_map__fd(impl_->futex->maps.futex_wakes);
  uint32_t key = 0, next = 0;
  uint32_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    gpuos_futex_wake_stats stats{};
    if (bpf_map_lookup_elem(fd, &next, &stats) == 0) {
      out.push_back({stats.pid, next, stats.calls, stats.woken});
    }
    key = next;
    prev = &key;
  }
  return out;
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
  for (struct bpf_object* obj : {impl_->proc->obj, impl_->sched->obj, impl_->faults->obj,
                                 impl_->mm->obj, impl_->futex->obj, impl_->syscalls->obj}) {
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
  int wakes_fd = bpf_map__fd(impl_->futex->maps.futex_wakes);
  int stats_fd = bpf_map__fd(impl_->syscalls->maps.syscall_stats);
  for (uint32_t tid : tids) bpf_map_delete_elem(wakes_fd, &tid);
  // Syscall totals are keyed by (tid, nr): collect the keys first, since
  // deleting while iterating restarts the walk.
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

}  // namespace gpuos
