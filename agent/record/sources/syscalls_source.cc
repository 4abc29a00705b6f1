// The syscall source: bpf/syscalls.bpf.c and its records' decoding; see
// syscalls_source.h.
#include "record/sources/syscalls_source.h"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <map>

#include "bpf/futex.h"
#include "bpf/mm.h"
#include "bpf/syscalls.h"
#include "common/syscall_names.h"
#include "record/sources/skeleton_source.h"
#include "syscalls.skel.h"

namespace gpuos {
namespace {

// Bytes of one element of a BPF array map: values are 8-byte aligned.
constexpr size_t kSlotStride = (sizeof(gpuos_syscall_slot) + 7) & ~size_t{7};

// Sums what the two tables hold per (thread, syscall) and per thread's
// futex wakes (one thread may wake through futex and futex_wake: summed).
class TableSum {
 public:
  // One (thread, syscall) total; `woken` counts only for a futex wake entry.
  void Add(uint32_t tid, uint32_t pid, int32_t nr, bool wake, uint64_t calls, uint64_t total_ns,
           uint64_t max_ns, uint64_t woken) {
    KernelSyscallTotal& total = totals_[{tid, nr}];
    total.pid = pid;
    total.tid = tid;
    total.nr = nr;
    total.calls += calls;
    total.total_ns += total_ns;
    total.max_ns = std::max(total.max_ns, max_ns);
    if (!wake) return;
    KernelFutexWakes& w = wakes_[tid];
    w.pid = pid;
    w.tid = tid;
    w.calls += calls;
    w.woken += woken;
  }
  KernelSyscallTables Tables() const {
    KernelSyscallTables out;
    out.totals.reserve(totals_.size());
    for (const auto& [k, total] : totals_) out.totals.push_back(total);
    out.wakes.reserve(wakes_.size());
    for (const auto& [tid, w] : wakes_) out.wakes.push_back(w);
    return out;
  }

 private:
  std::map<std::pair<uint32_t, int32_t>, KernelSyscallTotal> totals_;
  std::map<uint32_t, KernelFutexWakes> wakes_;
};

class SyscallsSourceImpl : public SkeletonSource<syscalls_bpf, syscalls_bpf__open_opts,
                                                 syscalls_bpf__destroy, SyscallsSource> {
 public:
  SyscallsSourceImpl() : SkeletonSource("syscalls") {}
  ~SyscallsSourceImpl() override {
    if (slots_) munmap(const_cast<uint8_t*>(slots_), slots_bytes_);
  }
  absl::Status AfterLoad() override;
  bool HoldsRecords() const override {
    for (uint32_t i = 0; i < slot_count_; ++i) {
      if (__atomic_load_n(&Slot(i)->seq, __ATOMIC_ACQUIRE) % 2 == 1) return true;
    }
    return false;
  }
  void Drain(const BpfRecordHandler& handler) override;
  void ForgetThreads(const std::vector<uint32_t>& tids) override;
  KernelSyscallTables ReadTables() const override;

 private:
  absl::Status Configure(const BpfSourceSetup& setup) override;
  const gpuos_syscall_slot* Slot(uint32_t i) const {
    return reinterpret_cast<const gpuos_syscall_slot*>(slots_ + i * kSlotStride);
  }
  void AddSlots(TableSum* sum) const;

  // The kernel's syscall_slots array (bpf/syscalls.h), mapped read-only.
  const uint8_t* slots_ = nullptr;
  size_t slots_bytes_ = 0;
  uint32_t slot_count_ = 0;
  int32_t nr_futex_ = -1;
  int32_t nr_futex_wake_ = -1;
};

absl::Status SyscallsSourceImpl::Configure(const BpfSourceSetup& setup) {
  auto* rodata = skel()->rodata;
  rodata->wakeup_bytes = setup.wakeup_bytes;
  // The syscalls recorded call by call.
  rodata->nr_futex = SyscallNumber("futex");
  rodata->nr_futex_waitv = SyscallNumber("futex_waitv");
  rodata->nr_futex_wait = SyscallNumber("futex_wait");
  rodata->nr_futex_wake = SyscallNumber("futex_wake");
  rodata->nr_mmap = SyscallNumber("mmap");
  rodata->nr_munmap = SyscallNumber("munmap");
  nr_futex_ = rodata->nr_futex;
  nr_futex_wake_ = rodata->nr_futex_wake;
  // A map needs one entry; with no slots wanted the free list stays empty.
  slot_count_ = setup.options.syscall_slots;
  bpf_map__set_max_entries(skel()->maps.free_syscall_slots, std::max<uint32_t>(slot_count_, 1));
  return absl::OkStatus();
}

// Hands every slot of syscall_slots to the kernel side's free list and maps
// the array for reading.
absl::Status SyscallsSourceImpl::AfterLoad() {
  int queue = bpf_map__fd(skel()->maps.free_syscall_slots);
  for (uint32_t i = 0; i < slot_count_; ++i) {
    if (bpf_map_update_elem(queue, nullptr, &i, BPF_ANY)) {
      return BpfLoadError("set up the BPF maps", errno);
    }
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t entries = bpf_map__max_entries(skel()->maps.syscall_slots);
  slots_bytes_ = (entries * kSlotStride + page - 1) / page * page;
  void* map = mmap(nullptr, slots_bytes_, PROT_READ, MAP_SHARED,
                   bpf_map__fd(skel()->maps.syscall_slots), 0);
  if (map == MAP_FAILED) return BpfLoadError("map the syscall slots", errno);
  slots_ = static_cast<const uint8_t*>(map);
  return absl::OkStatus();
}

KernelSyscallTables SyscallsSourceImpl::ReadTables() const {
  // Futex wake calls sit under GPUOS_WAKE_STATS_NR(nr) (bpf/syscalls.h):
  // they go back into their syscall's totals, and make the thread's wake
  // counts.
  TableSum sum;
  int fd = bpf_map__fd(skel()->maps.syscall_stats);
  gpuos_syscall_key key{}, next{};
  gpuos_syscall_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    gpuos_syscall_stats stats{};
    if (bpf_map_lookup_elem(fd, &key, &stats) != 0) continue;
    const bool wake = GPUOS_IS_WAKE_STATS_NR(key.nr);
    const int32_t nr = wake ? GPUOS_SYSCALL_OF_WAKE_STATS_NR(key.nr) : key.nr;
    sum.Add(key.tid, stats.pid, nr, wake, stats.calls, stats.total_ns, stats.max_ns, stats.woken);
  }
  AddSlots(&sum);
  return sum.Tables();
}

// The slots after syscall_stats: a thread's exit moves its totals there
// after marking its slot free, so a walk in this order may miss a thread
// that exits meanwhile (until the next walk) but never counts it twice.
// Each slot is read between two reads of its seq, which is odd while a
// thread owns it; a slot taken or freed meanwhile is skipped.
void SyscallsSourceImpl::AddSlots(TableSum* sum) const {
  std::vector<std::pair<uint32_t, gpuos_slot_entry>> entries;
  for (uint32_t i = 0; i < slot_count_; ++i) {
    const gpuos_syscall_slot* slot = Slot(i);
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
      const int32_t nr = !wake                         ? static_cast<int32_t>(e)
                         : e == GPUOS_SLOT_WAKE_FUTEX ? nr_futex_
                                                      : nr_futex_wake_;
      sum->Add(tid, pid, nr, wake, entry.calls, entry.total_ns, entry.max_ns,
               wake ? woken[e - GPUOS_SLOT_NRS] : 0);
    }
  }
}

// The mmap/munmap calls still held in the slots of threads that live on
// (bpf/mm.h), as the records they would have become.
void SyscallsSourceImpl::Drain(const BpfRecordHandler& handler) {
  for (uint32_t i = 0; i < slot_count_; ++i) {
    const gpuos_syscall_slot* slot = Slot(i);
    if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) % 2 == 0) continue;
    const gpuos_mm_calls_event& batch = slot->mm_batch;
    if (batch.count == 0 || batch.count > GPUOS_MM_BATCH) continue;
    // The kernel side fills the header when it sends a batch.
    gpuos_mm_calls_event record;
    std::memcpy(&record, &batch, sizeof(record));
    record.hdr.pid = slot->pid;
    record.hdr.tid = slot->tid;
    record.hdr.kind = GPUOS_EV_MM_CALLS;
    handler(&record,
            offsetof(gpuos_mm_calls_event, calls) + record.count * sizeof(gpuos_mm_record));
  }
}

void SyscallsSourceImpl::ForgetThreads(const std::vector<uint32_t>& tids) {
  int stats_fd = bpf_map__fd(skel()->maps.syscall_stats);
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

// The call's own start is the event's time.
void SetMmCall(const gpuos_mm_record& call, v1::Event* event) {
  event->set_ts_ns(call.start_ns);
  if (!call.is_munmap) {
    auto* m = event->mutable_mmap();
    m->set_duration_ns(call.duration_ns);
    m->set_addr(call.addr);
    m->set_length(call.length);
    m->set_prot(call.prot);
    m->set_flags(call.flags);
    m->set_fd(call.fd);
    m->set_result(call.result);
  } else {
    auto* m = event->mutable_munmap();
    m->set_duration_ns(call.duration_ns);
    m->set_addr(call.addr);
    m->set_length(call.length);
    m->set_result(call.result);
  }
}

bool DecodeMmCall(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_mm_event>(data, size);
  if (!e) return false;
  SetMmCall(e->call, event);
  emit(*event);
  return true;
}

// A batch of one thread's mmap/munmap calls (bpf/mm.h): one event per
// call, stamped with the call's own start.
bool DecodeMmCalls(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  // Cut after its last call: shorter than the struct, so not RecordAs<>.
  constexpr size_t kCallsOffset = offsetof(gpuos_mm_calls_event, calls);
  if (size < kCallsOffset) return false;
  const auto* batch = static_cast<const gpuos_mm_calls_event*>(data);
  const size_t count = batch->count;
  if (count == 0 || count > GPUOS_MM_BATCH ||
      size < kCallsOffset + count * sizeof(gpuos_mm_record)) {
    return false;
  }
  const v1::Event header = *event;
  for (size_t i = 0; i < count; ++i) {
    *event = header;
    SetMmCall(batch->calls[i], event);
    emit(*event);
  }
  return true;
}

bool DecodeFutexWait(const void* data, size_t size, v1::Event* event, RecordEmit emit) {
  const auto* e = RecordAs<gpuos_futex_wait_event>(data, size);
  if (!e) return false;
  auto* f = event->mutable_futex_wait();
  f->set_duration_ns(e->duration_ns);
  f->set_uaddr(e->uaddr);
  f->set_op(e->op);
  f->set_has_timeout(e->has_timeout != 0);
  f->set_result(e->result);
  emit(*event);
  return true;
}

}  // namespace

extern const BpfSourceModule kSyscallsSource = {
    "syscalls",
    {{GPUOS_EV_MMAP, "mmap", DecodeMmCall},
     {GPUOS_EV_MUNMAP, "munmap", DecodeMmCall},
     {GPUOS_EV_MM_CALLS, "mm_calls", DecodeMmCalls},
     {GPUOS_EV_FUTEX_WAIT, "futex_wait", DecodeFutexWait}},
    {{GPUOS_MAP_SYSCALL_STATS, "syscall_stats"},
     {GPUOS_MAP_MM_IN_FLIGHT, "mm_in_flight"},
     {GPUOS_MAP_FUTEX_IN_FLIGHT, "futex_in_flight"},
     {GPUOS_MAP_FUTEX_WAKES, "futex_wakes"}},
    []() -> std::unique_ptr<BpfSource> { return std::make_unique<SyscallsSourceImpl>(); },
    /*optional=*/false,
    // Its exit handler moves a thread's totals out of its slot before proc
    // tells the agent of the exit.
    /*attach_first=*/true,
};

}  // namespace gpuos
