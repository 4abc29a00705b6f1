// Loading, attaching and reading gpuos-trace's event sources; see
// bpf_session.h.  What one source does is in its module (record/sources/).
#include "record/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bpf/event_header.h"
#include "record/sources/cuda_uprobes_source.h"
#include "record/sources/syscalls_source.h"

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

// The maps every program shares (bpf/common.bpf.h).
constexpr const char* kSharedMaps[] = {"traced_tgids", "events",        "drop_counts",
                                       "thread_state", "syscall_slots", "tid_slots"};

// Names of the shared maps whose insertions can fail (enum gpuos_map_id);
// each source lists its own.
const char* MapName(uint32_t id) {
  if (id == GPUOS_MAP_TRACKED) return "traced_tgids";
  // thread_state's failed creations are counted under this id (common.bpf.h).
  if (id == GPUOS_MAP_SYSCALL_IN_FLIGHT) return "thread_state";
  for (const BpfSourceModule* module : BpfSourceModules()) {
    for (const BpfMapName& map : module->maps) {
      if (map.id == id) return map.name;
    }
  }
  return "unknown";
}

bpf_object* ObjectOf(const BpfSource& source) {
  bpf_object_skeleton* skeleton = source.skeleton();
  return skeleton ? *skeleton->obj : nullptr;
}

// Closes links all at once.  Closing a tracepoint link waits for a kernel
// grace period (35-90 ms each on the development VM), so closed one after
// another the dozen links of a recording made every recording end about
// 0.4 s after its command; closed together, the waits overlap.  Takes the
// skeletons' links (left null) and any others.
void DestroyLinksTogether(const std::vector<bpf_object_skeleton*>& skeletons,
                          std::vector<bpf_link*> links) {
  for (const bpf_object_skeleton* s : skeletons) {
    for (int i = 0; i < s->prog_cnt; ++i) {
      const auto* prog = reinterpret_cast<const bpf_prog_skeleton*>(
          reinterpret_cast<const char*>(s->progs) + static_cast<size_t>(i) * s->prog_skel_sz);
      if (prog->link && *prog->link) {
        links.push_back(*prog->link);
        *prog->link = nullptr;
      }
    }
  }
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

// The programs of `source` that GPUOS_BENCH_DETACH names (or all, when it
// names the source) are not attached, with a warning even under -q: the
// recording lacks their events.
void LeaveBenchDetachedOff(const BpfSourceModule& module, const BpfSource& source) {
  bpf_program* program;
  bpf_object__for_each_program(program, ObjectOf(source)) {
    if (!BenchDetaches(module.name) && !BenchDetaches(bpf_program__name(program))) continue;
    bpf_program__set_autoattach(program, false);
    fprintf(stderr, "gpuos-trace: warning: GPUOS_BENCH_DETACH: %s/%s not attached; its events are missing\n",
            module.name, bpf_program__name(program));
  }
}

}  // namespace

absl::Status BpfLoadError(const std::string& what, int err) {
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

const char* EventKindName(uint32_t kind) {
  for (const BpfSourceModule* module : BpfSourceModules()) {
    for (const BpfRecordKind& k : module->kinds) {
      if (k.kind == kind) return k.name;
    }
  }
  return "unknown";
}

struct BpfSession::Impl {
  RecordHandler handler;
  BpfSessionOptions options;
  bpf_object_open_opts open_opts = {};
  // The loaded sources, in attach order; the first one's object owns the
  // shared maps.
  std::vector<std::unique_ptr<BpfSource>> sources;
  SyscallsSource* syscalls = nullptr;
  // Loaded by the first AttachCudaUprobes().
  CudaUprobesSource* cuda = nullptr;
  std::set<pid_t> cuda_pids;
  ring_buffer* ring = nullptr;
  // traced_tgids (bpf/common.bpf.h), mapped writable: the agent sets its
  // bits with atomic ORs, as the kernel side does.
  uint64_t* traced_tgids = nullptr;
  size_t traced_tgids_bytes = 0;
  // The word holding pid's bit (bit pid % 64), or null for a pid beyond
  // the kernel's limit.
  uint64_t* TracedWord(uint32_t pid) const {
    return static_cast<size_t>(pid / 64) * sizeof(uint64_t) < traced_tgids_bytes ? &traced_tgids[pid / 64]
                                                                                  : nullptr;
  }

  ~Impl() {
    // Freeing the ring buffer first: no callback may run into a dead handler.
    if (ring) ring_buffer__free(ring);
    DetachAll();
    if (traced_tgids) munmap(traced_tgids, traced_tgids_bytes);
    while (!sources.empty()) sources.pop_back();
  }

  bpf_object* owner() const { return ObjectOf(*sources.front()); }
  BpfSourceSetup Setup() const {
    return {options, &open_opts, options.ring_buffer_bytes / 8};
  }

  // Every program's link, the skeletons' and those the sources made by hand.
  void DetachAll() {
    std::vector<bpf_object_skeleton*> skeletons;
    std::vector<bpf_link*> links;
    std::vector<int> link_fds;
    for (const auto& source : sources) {
      if (!source) continue;  // a failed start leaves empty places
      if (source->skeleton()) skeletons.push_back(source->skeleton());
      source->TakeLinks(&links, &link_fds);
    }
    for (int fd : link_fds) close(fd);
    DestroyLinksTogether(skeletons, std::move(links));
  }

  absl::Status ShareMaps(bpf_object* obj) const;
  absl::Status OpenListed();
  absl::Status LoadOwner();
  absl::Status LoadOthers();
  absl::Status AttachListed();
  // Loads a source opened meanwhile into this session's maps.
  absl::Status Load(BpfSource* source) const;
  // An optional source that failed: off, with a warning.
  void TurnOff(size_t index, const absl::Status& why);

  static int OnRecord(void* ctx, void* data, size_t size) {
    static_cast<Impl*>(ctx)->handler(data, size);
    return 0;
  }
};

absl::Status BpfSession::Impl::ShareMaps(bpf_object* obj) const {
  for (const char* name : kSharedMaps) {
    bpf_map* theirs = bpf_object__find_map_by_name(owner(), name);
    bpf_map* mine = bpf_object__find_map_by_name(obj, name);
    if (!theirs || !mine) continue;
    if (int err = bpf_map__reuse_fd(mine, bpf_map__fd(theirs))) {
      return BpfLoadError(absl::StrCat("share map ", name), err);
    }
  }
  return absl::OkStatus();
}

void BpfSession::Impl::TurnOff(size_t index, const absl::Status& why) {
  if (!options.quiet) {
    fprintf(stderr, "gpuos-trace: warning: no %s events in this recording: %s\n",
            BpfSourceModules()[index]->name, std::string(why.message()).c_str());
  }
  sources[index].reset();
}

// Opens every listed source first: configuration happens before any load.
absl::Status BpfSession::Impl::OpenListed() {
  const auto& modules = BpfSourceModules();
  sources.resize(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!modules[i]->create) continue;
    sources[i] = modules[i]->create();
    absl::Status status = sources[i]->Open(Setup());
    if (status.ok()) continue;
    if (!modules[i]->optional) return status;
    TurnOff(i, status);
  }
  if (!sources.front()) return absl::InternalError("the first BPF source is not loaded at start");
  return absl::OkStatus();
}

// Sizes the shared maps in the first object, loads it, and maps the traced set.
absl::Status BpfSession::Impl::LoadOwner() {
  auto set_entries = [this](const char* name, uint32_t entries) {
    bpf_map__set_max_entries(bpf_object__find_map_by_name(owner(), name), entries);
  };
  set_entries("events", static_cast<uint32_t>(options.ring_buffer_bytes));
  // A map needs one entry; with no slots wanted the syscall source's free
  // list stays empty.
  set_entries("syscall_slots", std::max<uint32_t>(options.syscall_slots, 1));
  set_entries("tid_slots", TidSlotEntries());
  if (int err = bpf_object__load_skeleton(sources.front()->skeleton())) {
    return BpfLoadError("load the BPF programs", err);
  }
  bpf_map* traced = bpf_object__find_map_by_name(owner(), "traced_tgids");
  const size_t bytes = bpf_map__max_entries(traced) * sizeof(uint64_t);
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(traced), 0);
  if (map == MAP_FAILED) return BpfLoadError("map the traced process set", errno);
  traced_tgids = static_cast<uint64_t*>(map);
  traced_tgids_bytes = bytes;
  return sources.front()->AfterLoad();
}

absl::Status BpfSession::Impl::Load(BpfSource* source) const {
  if (absl::Status status = ShareMaps(ObjectOf(*source)); !status.ok()) return status;
  if (int err = bpf_object__load_skeleton(source->skeleton())) {
    return BpfLoadError("load the BPF programs", err);
  }
  return source->AfterLoad();
}

absl::Status BpfSession::Impl::LoadOthers() {
  for (size_t i = 1; i < sources.size(); ++i) {
    if (!sources[i]) continue;
    absl::Status status = Load(sources[i].get());
    if (status.ok()) continue;
    if (!BpfSourceModules()[i]->optional) return status;
    TurnOff(i, status);
  }
  return absl::OkStatus();
}

// Attaches those marked attach_first, then the others in list order
// (bpf_source.h), and drops the empty places.
absl::Status BpfSession::Impl::AttachListed() {
  const auto& modules = BpfSourceModules();
  for (bool first : {true, false}) {
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!sources[i] || modules[i]->attach_first != first) continue;
      LeaveBenchDetachedOff(*modules[i], *sources[i]);
      int err = bpf_object__attach_skeleton(sources[i]->skeleton());
      if (!err) continue;
      absl::Status status = BpfLoadError("attach the BPF programs to their tracepoints", err);
      if (!modules[i]->optional) return status;
      TurnOff(i, status);
    }
  }
  sources.erase(std::remove(sources.begin(), sources.end(), nullptr), sources.end());
  for (const auto& source : sources) {
    if (auto* s = dynamic_cast<SyscallsSource*>(source.get())) syscalls = s;
  }
  if (!syscalls) return absl::InternalError("the syscall source is not loaded");
  return absl::OkStatus();
}

bool BenchDetaches(absl::string_view name) {
  static const std::set<std::string, std::less<>>* const kDetached = [] {
    auto* names = new std::set<std::string, std::less<>>;
    if (const char* list = getenv("GPUOS_BENCH_DETACH")) {
      for (absl::string_view n : absl::StrSplit(list, ',', absl::SkipEmpty())) names->emplace(n);
    }
    return names;
  }();
  return kDetached->find(name) != kDetached->end();
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
  impl->open_opts.sz = sizeof(impl->open_opts);
  if (!impl->options.btf_path.empty()) {
    impl->open_opts.btf_custom_path = impl->options.btf_path.c_str();
  }
  if (absl::Status status = impl->OpenListed(); !status.ok()) return status;
  if (absl::Status status = impl->LoadOwner(); !status.ok()) return status;
  if (absl::Status status = impl->LoadOthers(); !status.ok()) return status;
  impl->ring = ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(impl->owner(), "events")),
                                &Impl::OnRecord, impl.get(), nullptr);
  if (!impl->ring) return BpfLoadError("open the BPF ring buffer", errno);
  // Attach last (AttachListed says in which order).
  if (absl::Status status = impl->AttachListed(); !status.ok()) return status;
  return std::unique_ptr<BpfSession>(new BpfSession(std::move(impl)));
}

absl::Status BpfSession::Track(uint32_t pid) {
  uint64_t* word = impl_->TracedWord(pid);
  if (!word) {
    return absl::InternalError(
        absl::StrFormat("cannot track pid %d: beyond the kernel's pid limit", pid));
  }
  // Seen by every program at its next event (bpf/common.bpf.h, is_tracked).
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

void BpfSession::Untrack(uint32_t pid) {
  if (uint64_t* word = impl_->TracedWord(pid)) {
    __atomic_fetch_and(word, ~(uint64_t{1} << (pid % 64)), __ATOMIC_SEQ_CST);
  }
}

absl::Status BpfSession::ShareMapsWith(struct bpf_object* obj) const {
  return impl_->ShareMaps(obj);
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

KernelSyscallTables BpfSession::ReadSyscallTables() const { return impl_->syscalls->ReadTables(); }

void BpfSession::DetachAndDrain() {
  impl_->DetachAll();
  bool held = false;  // by a thread that lives on; none once a launched tree has ended
  for (const auto& source : impl_->sources) held = held || source->HoldsRecords();
  // A detached program may still be finishing a run on another CPU (the
  // kernel frees the tracepoint's old probe list after a grace period, it
  // does not wait for it); runs last microseconds.
  if (held) usleep(20'000);
  Consume().IgnoreError();
  if (!held) return;
  for (const auto& source : impl_->sources) source->Drain(impl_->handler);
}

KernelDrops BpfSession::ReadDrops() const {
  KernelDrops drops;
  int fd = bpf_map__fd(bpf_object__find_map_by_name(impl_->owner(), "drop_counts"));
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
  for (const auto& source : impl_->sources) {
    struct bpf_program* prog;
    bpf_object__for_each_program(prog, ObjectOf(*source)) {
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
  for (const auto& source : impl_->sources) source->ForgetThreads(tids);
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
  if (!impl_->cuda) {
    std::unique_ptr<CudaUprobesSource> cuda = CudaUprobesSource::Create();
    absl::Status status = cuda->Open(impl_->Setup());
    if (status.ok()) status = impl_->Load(cuda.get());
    if (!status.ok()) return status;
    impl_->cuda = cuda.get();
    impl_->sources.push_back(std::move(cuda));
  }
  absl::StatusOr<int> probed = impl_->cuda->ProbeProcess(pid, library_path);
  if (probed.ok()) impl_->cuda_pids.insert(pid);
  return probed;
}

}  // namespace gpuos
