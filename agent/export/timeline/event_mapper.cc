// EventMapper and RecordDescriber: see timeline/event_mapper.h.
//
// Payload layout per RecordKind (a = TimelineRecord::a, b = ::b):
//   kOffCpu        a0 runqueue_ns  a1 prev_state  a3 context-switch counter track
//                  b0 cause  b1 syscall_nr  b2 woken_by_tid  b3 voluntary
//   kMmap          a0 addr  a1 length  a2 result  b0 prot  b1 flags  b2 fd
//   kMunmap        a0 addr  a1 length  a2 result
//   kFutexWait     a0 uaddr  a2 result  b0 op  b1 has_timeout
//   kNvtxPushPop   a0 depth  b0 domain  b1 color  b2 category
//   kNvtxStartEnd  a1 start tid  b0 domain  b1 color  b2 category  b3 end_tid
//   kNvtxMark      b0 domain
//   kCudaApi       b0 correlation_id  b1 cbid  b2 return_value  b3 driver
//   kGpuKernel     a0 grid x|y  a1 grid z|block x  a2 block y|z
//                  a3 static|dynamic shared bytes  b0 correlation_id
//                  b1 registers  b2 graph_id
//   kGpuMemcpy     a0 bytes  a1 graph_id  b0 correlation_id
//                  b1 direction|src_kind<<8|dst_kind<<16|async<<24
//                  b2 src_device  b3 dst_device
//   kGpuMemset     a0 bytes  a1 graph_id  b0 correlation_id  b1 value
//                  b2 memory_kind|async<<8
//   kGpuSync       a0 context  b0 correlation_id  b1 kind  b2 stream  b3 cuda_event_id
//   kStep          a0 index
//   kExec          b0 filename
//   kProcessExit   b0 wait_status
//   kPageFaults    a0 last_ns  b0 count  b1 major
//   kWakeup        a0 flow id  b0 the other thread's tid  b1 0 on the waker (flow start), 1 on the wakee (end)
// Signed values are stored as their two's complement bits.
#include "export/timeline/event_mapper.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gpuos {
namespace {

constexpr uint32_t kNoString = std::numeric_limits<uint32_t>::max();

const char* OffCpuCauseName(uint32_t cause) {
  switch (cause) {
    case v1::OFF_CPU_CAUSE_PREEMPTED:
      return "preempted";
    case v1::OFF_CPU_CAUSE_FUTEX:
      return "futex";
    case v1::OFF_CPU_CAUSE_SYSCALL:
      return "syscall";
    case v1::OFF_CPU_CAUSE_PAGE_FAULT:
      return "page fault";
    default:
      return "unknown";
  }
}

const char* DirectionName(uint32_t direction) {
  static constexpr const char* kNames[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                           "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return direction < std::size(kNames) ? kNames[direction] : "unknown";
}

const char* MemoryKindName(uint32_t kind) {
  static constexpr const char* kNames[] = {"unknown", "pageable", "pinned",        "device",
                                           "array",   "managed",  "device static", "managed static"};
  return kind < std::size(kNames) ? kNames[kind] : "unknown";
}

const char* SyncKindName(uint32_t kind) {
  static constexpr const char* kNames[] = {"unknown", "event", "stream wait event", "stream",
                                           "context"};
  return kind < std::size(kNames) ? kNames[kind] : "unknown";
}

uint64_t Pack(int32_t low, int32_t high) {
  return static_cast<uint32_t>(low) | (static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32);
}
int32_t Low(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
int32_t High(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v >> 32)); }

}  // namespace

std::string_view CudaApiDisplayName(std::string_view name) {
  const size_t tag = name.rfind("_v");
  if (tag == std::string_view::npos || tag == 0) return name;
  std::string_view digits = name.substr(tag + 2);
  if (digits.size() < 4) return name;
  for (char c : digits) {
    if (c < '0' || c > '9') return name;
  }
  return name.substr(0, tag);
}

EventMapper::EventMapper(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
                         FlowTable* flows, RecordSorter* sorter)
    : header_(header), tracks_(tracks), strings_(strings), flows_(flows), sorter_(sorter) {
  // Named so that users can search for them in the viewers.
  mmap_name_ = strings_->Intern("mmap");
  munmap_name_ = strings_->Intern("munmap");
  futex_name_ = strings_->Intern("futex wait");
  exec_name_ = strings_->Intern("exec");
  exit_name_ = strings_->Intern("process exit");
  memset_name_ = strings_->Intern("Memset");
  unnamed_name_ = strings_->Intern("(unnamed)");
  wakes_name_ = strings_->Intern("wakes");
  woken_name_ = strings_->Intern("woken");
  no_domain_ = kNoString;
  for (uint32_t cause = 0; cause <= v1::OFF_CPU_CAUSE_PAGE_FAULT; ++cause) {
    off_cpu_names_.push_back(strings_->Intern(absl::StrCat("off-CPU (", OffCpuCauseName(cause), ")")));
  }
  for (uint32_t direction = 0; direction <= v1::MEMCPY_PTOP; ++direction) {
    memcpy_names_.push_back(strings_->Intern(absl::StrCat("Memcpy ", DirectionName(direction))));
  }
  for (uint32_t kind = 0; kind <= v1::GpuSync::CONTEXT; ++kind) {
    sync_names_.push_back(strings_->Intern(absl::StrCat("sync wait (", SyncKindName(kind), ")")));
  }
}

TimelineRecord EventMapper::NewRecord(const v1::Event& event, RecordKind kind, uint64_t dur) {
  TimelineRecord record{};
  record.ts = event.ts_ns();
  // A corrupt duration must not wrap the end time around.
  record.dur = std::min(dur, std::numeric_limits<uint64_t>::max() - record.ts);
  record.pid = event.pid();
  record.kind = kind;
  return record;
}

absl::Status EventMapper::Emit(TimelineRecord record) {
  record.ordinal = ordinal_++;
  return sorter_->Add(record);
}

absl::Status EventMapper::EmitWakeup(const v1::Event& event, uint32_t offcpu_track) {
  const v1::OffCpu& off = event.off_cpu();
  if (!off.voluntary() || off.woken_by_tid() == 0 || off.woken_by_tid() == event.tid() ||
      !pids_.contains(off.waker_pid())) {
    return absl::OkStatus();
  }
  const uint64_t wake = event.ts_ns() + off.duration_ns() - std::min(off.runqueue_ns(), off.duration_ns());
  // splitmix64 of (tid, switch-out time), salted apart from launch flows.
  uint64_t z = ((static_cast<uint64_t>(event.tid()) << 32) ^ event.ts_ns()) * 0x9e3779b97f4a7c15ull + 0x5bd1e995ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint64_t id = z == 0 ? 1 : z;
  TimelineRecord from{};
  from.ts = wake;
  from.pid = off.waker_pid();
  from.kind = RecordKind::kWakeup;
  from.track = tracks_->Thread(off.waker_pid(), off.woken_by_tid());
  from.name = wakes_name_;
  from.a[0] = id;
  from.b[0] = event.tid();
  from.b[1] = 0;
  if (absl::Status s = Emit(from); !s.ok()) return s;
  TimelineRecord to = from;
  to.pid = event.pid();
  to.track = offcpu_track;
  to.name = woken_name_;
  to.b[0] = off.woken_by_tid();
  to.b[1] = 1;
  return Emit(to);
}

absl::Status EventMapper::Add(const v1::Event& event) {
  ++events_;
  const uint32_t pid = event.pid();
  // Only the tracer's own accounting has no process; nothing to draw.
  if (pid == 0) return absl::OkStatus();
  pids_.insert(pid);
  // Events of a thread that name none belong to the main thread.
  const uint32_t tid = event.tid() != 0 ? event.tid() : pid;
  switch (event.payload_case()) {
    case v1::Event::kProcessStart: {
      const v1::ProcessStart& start = event.process_start();
      tracks_->SetProcessName(pid, start.comm());
      tracks_->SetThreadName(pid, pid, start.comm());
      if (start.is_root() && header_.command_line_size() > 0) {
        tracks_->SetProcessCmdline(pid, {header_.command_line().begin(), header_.command_line().end()});
      }
      return absl::OkStatus();
    }
    case v1::Event::kThreadStart:
      tracks_->SetThreadName(pid, tid, event.thread_start().comm());
      return absl::OkStatus();
    case v1::Event::kExec: {
      const v1::Exec& exec = event.exec();
      tracks_->SetProcessName(pid, exec.comm());
      // exec makes the calling thread the process's main thread.
      tracks_->SetThreadName(pid, pid, exec.comm());
      if (pid != header_.root_pid() || header_.command_line_size() == 0) {
        tracks_->SetProcessCmdline(pid, {exec.filename()});
      }
      TimelineRecord record = NewRecord(event, RecordKind::kExec, 0);
      record.track = tracks_->Process(pid);
      record.name = exec_name_;
      record.b[0] = strings_->Intern(exec.filename());
      return Emit(record);
    }
    case v1::Event::kCommChange:
      tracks_->SetThreadName(pid, tid, event.comm_change().new_comm());
      if (tid == pid) tracks_->SetProcessName(pid, event.comm_change().new_comm());
      return absl::OkStatus();
    case v1::Event::kThreadExit:
      tracks_->SetThreadName(pid, tid, event.thread_exit().comm());
      return absl::OkStatus();
    case v1::Event::kProcessExit: {
      TimelineRecord record = NewRecord(event, RecordKind::kProcessExit, 0);
      record.track = tracks_->Process(pid);
      record.name = exit_name_;
      record.b[0] = static_cast<uint32_t>(event.process_exit().wait_status());
      return Emit(record);
    }
    case v1::Event::kOffCpu: {
      const v1::OffCpu& off = event.off_cpu();
      TimelineRecord record = NewRecord(event, RecordKind::kOffCpu, off.duration_ns());
      record.track = tracks_->ThreadChild(pid, tid, TrackKind::kThreadOffCpu);
      const uint32_t cause = static_cast<uint32_t>(off.cause());
      record.name = off_cpu_names_[cause < off_cpu_names_.size() ? cause : 0];
      record.a[0] = off.runqueue_ns();
      record.a[1] = static_cast<uint64_t>(off.prev_state());
      record.a[3] = tracks_->Counter(CounterKind::kContextSwitchesPerSecond, pid);
      record.b[0] = cause;
      record.b[1] = static_cast<uint32_t>(off.syscall_nr());
      record.b[2] = off.woken_by_tid();
      record.b[3] = off.voluntary();
      if (absl::Status s = Emit(record); !s.ok()) return s;
      return EmitWakeup(event, record.track);
    }
    case v1::Event::kPageFaults: {
      const v1::PageFaults& faults = event.page_faults();
      TimelineRecord record = NewRecord(event, RecordKind::kPageFaults, 0);
      record.track = tracks_->Counter(CounterKind::kPageFaultsPerSecond, pid);
      tracks_->Thread(pid, tid);
      record.a[0] = std::max(faults.last_ns(), event.ts_ns());
      record.b[0] = faults.count();
      record.b[1] = faults.major();
      return Emit(record);
    }
    case v1::Event::kMmap: {
      const v1::MmapCall& call = event.mmap();
      TimelineRecord record = NewRecord(event, RecordKind::kMmap, call.duration_ns());
      record.track = tracks_->ThreadChild(pid, tid, TrackKind::kThreadOs);
      record.name = mmap_name_;
      record.a[0] = call.addr();
      record.a[1] = call.length();
      record.a[2] = static_cast<uint64_t>(call.result());
      record.b[0] = call.prot();
      record.b[1] = call.flags();
      record.b[2] = static_cast<uint32_t>(call.fd());
      return Emit(record);
    }
    case v1::Event::kMunmap: {
      const v1::MunmapCall& call = event.munmap();
      TimelineRecord record = NewRecord(event, RecordKind::kMunmap, call.duration_ns());
      record.track = tracks_->ThreadChild(pid, tid, TrackKind::kThreadOs);
      record.name = munmap_name_;
      record.a[0] = call.addr();
      record.a[1] = call.length();
      record.a[2] = static_cast<uint64_t>(call.result());
      return Emit(record);
    }
    case v1::Event::kFutexWait: {
      const v1::FutexWait& wait = event.futex_wait();
      TimelineRecord record = NewRecord(event, RecordKind::kFutexWait, wait.duration_ns());
      record.track = tracks_->ThreadChild(pid, tid, TrackKind::kThreadOs);
      record.name = futex_name_;
      record.a[0] = wait.uaddr();
      record.a[2] = static_cast<uint64_t>(wait.result());
      record.b[0] = wait.op();
      record.b[1] = wait.has_timeout();
      return Emit(record);
    }
    case v1::Event::kNvtxRange: {
      const v1::NvtxRange& range = event.nvtx_range();
      const bool start_end = range.kind() == v1::NvtxRange::START_END;
      TimelineRecord record = NewRecord(
          event, start_end ? RecordKind::kNvtxStartEnd : RecordKind::kNvtxPushPop,
          range.duration_ns());
      record.track = start_end ? tracks_->ProcessChild(pid, TrackKind::kNvtxAsync)
                               : tracks_->Thread(pid, tid);
      if (start_end) tracks_->Thread(pid, tid);
      record.name = range.name().empty() ? unnamed_name_ : strings_->Intern(range.name());
      record.a[0] = range.depth();
      record.a[1] = tid;
      record.b[0] = range.domain().empty() ? no_domain_ : strings_->Intern(range.domain());
      record.b[1] = range.color();
      record.b[2] = range.category();
      record.b[3] = range.end_tid();
      return Emit(record);
    }
    case v1::Event::kNvtxMark: {
      const v1::NvtxMark& mark = event.nvtx_mark();
      TimelineRecord record = NewRecord(event, RecordKind::kNvtxMark, 0);
      record.track = tracks_->Thread(pid, tid);
      record.name = mark.name().empty() ? unnamed_name_ : strings_->Intern(mark.name());
      record.b[0] = mark.domain().empty() ? no_domain_ : strings_->Intern(mark.domain());
      return Emit(record);
    }
    case v1::Event::kCudaApi: {
      const v1::CudaApiCall& call = event.cuda_api();
      TimelineRecord record = NewRecord(event, RecordKind::kCudaApi, call.duration_ns());
      record.track = tracks_->Thread(pid, tid);
      record.name = call.name().empty() ? unnamed_name_
                                        : strings_->Intern(call.driver() ? std::string_view(call.name())
                                                                         : CudaApiDisplayName(call.name()));
      record.b[0] = call.correlation_id();
      record.b[1] = call.cbid();
      record.b[2] = static_cast<uint32_t>(call.return_value());
      record.b[3] = call.driver();
      flows_->AddApiCall(pid, call.correlation_id());
      return Emit(record);
    }
    case v1::Event::kGpuKernel: {
      const v1::GpuKernel& kernel = event.gpu_kernel();
      TimelineRecord record = NewRecord(event, RecordKind::kGpuKernel, kernel.duration_ns());
      record.track = tracks_->GpuStream(pid, kernel.device(), kernel.context(), kernel.stream());
      tracks_->Counter(CounterKind::kGpuBusyPercent, kernel.device());
      record.name = kernel.name().empty() ? unnamed_name_ : strings_->Intern(kernel.name());
      record.a[0] = Pack(kernel.grid_x(), kernel.grid_y());
      record.a[1] = Pack(kernel.grid_z(), kernel.block_x());
      record.a[2] = Pack(kernel.block_y(), kernel.block_z());
      record.a[3] = Pack(kernel.static_shared_bytes(), static_cast<int32_t>(kernel.dynamic_shared_bytes()));
      record.b[0] = kernel.correlation_id();
      record.b[1] = kernel.registers_per_thread();
      record.b[2] = kernel.graph_id();
      flows_->AddGpuWork(pid, kernel.correlation_id());
      return Emit(record);
    }
    case v1::Event::kGpuMemcpy: {
      const v1::GpuMemcpy& copy = event.gpu_memcpy();
      TimelineRecord record = NewRecord(event, RecordKind::kGpuMemcpy, copy.duration_ns());
      record.track = tracks_->GpuStream(pid, copy.device(), copy.context(), copy.stream());
      tracks_->Counter(CounterKind::kGpuBusyPercent, copy.device());
      const uint32_t direction = static_cast<uint32_t>(copy.direction());
      record.name = memcpy_names_[direction < memcpy_names_.size() ? direction : 0];
      record.a[0] = copy.bytes();
      record.a[1] = copy.graph_id();
      record.b[0] = copy.correlation_id();
      record.b[1] = (direction & 0xff) | ((static_cast<uint32_t>(copy.src_kind()) & 0xff) << 8) |
                    ((static_cast<uint32_t>(copy.dst_kind()) & 0xff) << 16) |
                    (static_cast<uint32_t>(copy.async()) << 24);
      record.b[2] = copy.src_device();
      record.b[3] = copy.dst_device();
      flows_->AddGpuWork(pid, copy.correlation_id());
      return Emit(record);
    }
    case v1::Event::kGpuMemset: {
      const v1::GpuMemset& set = event.gpu_memset();
      TimelineRecord record = NewRecord(event, RecordKind::kGpuMemset, set.duration_ns());
      record.track = tracks_->GpuStream(pid, set.device(), set.context(), set.stream());
      tracks_->Counter(CounterKind::kGpuBusyPercent, set.device());
      record.name = memset_name_;
      record.a[0] = set.bytes();
      record.a[1] = set.graph_id();
      record.b[0] = set.correlation_id();
      record.b[1] = set.value();
      record.b[2] = (static_cast<uint32_t>(set.memory_kind()) & 0xff) |
                    (static_cast<uint32_t>(set.async()) << 8);
      flows_->AddGpuWork(pid, set.correlation_id());
      return Emit(record);
    }
    case v1::Event::kGpuSync: {
      const v1::GpuSync& sync = event.gpu_sync();
      TimelineRecord record = NewRecord(event, RecordKind::kGpuSync, sync.duration_ns());
      // The record names no thread; the flow from its API call shows which.
      record.track = tracks_->ProcessChild(pid, TrackKind::kGpuSync);
      const uint32_t kind = static_cast<uint32_t>(sync.kind());
      record.name = sync_names_[kind < sync_names_.size() ? kind : 0];
      record.a[0] = sync.context();
      record.b[0] = sync.correlation_id();
      record.b[1] = kind;
      record.b[2] = sync.stream();
      record.b[3] = sync.cuda_event_id();
      flows_->AddGpuWork(pid, sync.correlation_id());
      return Emit(record);
    }
    case v1::Event::kFutexWakes:
    case v1::Event::kSyscallStats:
      // Cumulative totals: the report shows them; a timeline has no place.
      tracks_->Thread(pid, tid);
      return absl::OkStatus();
    case v1::Event::kTracerStats:
    case v1::Event::kShimStats:
    case v1::Event::kRankInfo:
      if (event.rank_info().has_rank()) {
        tracks_->SetRank(pid, event.rank_info().rank(),
                         event.rank_info().has_world_size() ? event.rank_info().world_size() : -1);
      }
      return absl::OkStatus();
    case v1::Event::kBlockIo:  // not drawn yet
    case v1::Event::kCaptureWindow:  // drawn from both edges: AddCaptureWindow
    case v1::Event::PAYLOAD_NOT_SET:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status EventMapper::AddStep(const StepSpan& step) {
  TimelineRecord record{};
  record.ts = step.start_ns;
  record.dur = step.end_ns > step.start_ns ? step.end_ns - step.start_ns : 0;
  record.pid = step.pid;
  record.kind = RecordKind::kStep;
  record.track = tracks_->Steps(step.pid);
  record.name = strings_->Intern(absl::StrCat("step ", step.index));
  record.a[0] = static_cast<uint64_t>(step.index);
  return Emit(record);
}

absl::Status EventMapper::AddAttachWindow(uint64_t start_ns, uint64_t end_ns) {
  TimelineRecord record{};
  record.ts = start_ns;
  record.dur = end_ns > start_ns ? end_ns - start_ns : 0;
  record.kind = RecordKind::kAttachWindow;
  record.track = tracks_->AttachWindow();
  record.name = strings_->Intern("attach window");
  return Emit(record);
}

absl::Status EventMapper::AddCaptureWindow(uint32_t pid, uint64_t start_ns, uint64_t end_ns,
                                           const std::string& reason) {
  TimelineRecord record{};
  record.ts = start_ns;
  record.dur = end_ns > start_ns ? end_ns - start_ns : 0;
  record.pid = pid;
  record.kind = RecordKind::kCaptureWindow;
  record.track = tracks_->ProcessChild(pid, TrackKind::kCaptureWindows);
  record.name = strings_->Intern(absl::StrCat("capture: ", reason));
  return Emit(record);
}

RecordDescriber::RecordDescriber(const v1::TraceHeader& header, const StringTable& strings)
    : header_(header), strings_(strings) {
  args_.reserve(16);
}

DebugArg& RecordDescriber::Arg(const char* key) {
  args_.emplace_back();
  args_.back().key = key;
  return args_.back();
}
void RecordDescriber::Int(const char* key, int64_t value) {
  DebugArg& arg = Arg(key);
  arg.type = DebugArg::Type::kInt;
  arg.int_value = value;
}
void RecordDescriber::Uint(const char* key, uint64_t value) {
  DebugArg& arg = Arg(key);
  arg.type = DebugArg::Type::kUint;
  arg.uint_value = value;
}
void RecordDescriber::Pointer(const char* key, uint64_t value) {
  DebugArg& arg = Arg(key);
  arg.type = DebugArg::Type::kPointer;
  arg.uint_value = value;
}
void RecordDescriber::Bool(const char* key, bool value) {
  DebugArg& arg = Arg(key);
  arg.type = DebugArg::Type::kBool;
  arg.bool_value = value;
}
void RecordDescriber::String(const char* key, std::string_view value) {
  DebugArg& arg = Arg(key);
  arg.type = DebugArg::Type::kString;
  arg.string_value = value;
}

void RecordDescriber::Describe(const TimelineRecord& r, SliceEvent* event) {
  // GPU work's device, context and stream are in its track's name: not
  // repeated on every slice.
  args_.clear();
  event->name_id = r.name;
  event->name = strings_.Get(r.name);
  auto domain = [&](uint32_t id) {
    if (id != kNoString) String("domain", strings_.Get(id));
  };
  switch (r.kind) {
    case RecordKind::kOffCpu: {
      event->category = SliceCategory::kSched;
      String("cause", OffCpuCauseName(r.b[0]));
      const int32_t nr = static_cast<int32_t>(r.b[1]);
      if (nr >= 0) {
        auto it = header_.syscall_names().find(nr);
        if (it != header_.syscall_names().end()) {
          String("syscall", it->second);
        } else {
          Int("syscall_nr", nr);
        }
      }
      Uint("runqueue_ns", r.a[0]);
      Bool("voluntary", r.b[3] != 0);
      Int("prev_state", static_cast<int64_t>(r.a[1]));
      if (r.b[2] != 0) Uint("woken_by_tid", r.b[2]);
      break;
    }
    case RecordKind::kMmap:
      event->category = SliceCategory::kOs;
      Pointer("addr", r.a[0]);
      Uint("length", r.a[1]);
      Uint("prot", r.b[0]);
      Uint("flags", r.b[1]);
      Int("fd", static_cast<int32_t>(r.b[2]));
      Int("result", static_cast<int64_t>(r.a[2]));
      break;
    case RecordKind::kMunmap:
      event->category = SliceCategory::kOs;
      Pointer("addr", r.a[0]);
      Uint("length", r.a[1]);
      Int("result", static_cast<int64_t>(r.a[2]));
      break;
    case RecordKind::kFutexWait:
      event->category = SliceCategory::kOs;
      Pointer("uaddr", r.a[0]);
      Uint("op", r.b[0]);
      Bool("has_timeout", r.b[1] != 0);
      Int("result", static_cast<int64_t>(r.a[2]));
      break;
    case RecordKind::kNvtxPushPop:
      event->category = SliceCategory::kNvtx;
      domain(r.b[0]);
      Uint("depth", r.a[0]);
      if (r.b[1] != 0) Uint("color", r.b[1]);
      if (r.b[2] != 0) Uint("category", r.b[2]);
      break;
    case RecordKind::kNvtxStartEnd:
      event->category = SliceCategory::kNvtx;
      domain(r.b[0]);
      Uint("start_tid", r.a[1]);
      if (r.b[3] != 0) Uint("end_tid", r.b[3]);
      if (r.b[1] != 0) Uint("color", r.b[1]);
      if (r.b[2] != 0) Uint("category", r.b[2]);
      break;
    case RecordKind::kNvtxMark:
      event->category = SliceCategory::kNvtx;
      domain(r.b[0]);
      break;
    case RecordKind::kCudaApi:
      event->category = SliceCategory::kCuda;
      Uint("correlation_id", r.b[0]);
      Uint("cbid", r.b[1]);
      Int("return_value", static_cast<int32_t>(r.b[2]));
      Bool("driver", r.b[3] != 0);
      break;
    case RecordKind::kGpuKernel:
      event->category = SliceCategory::kGpu;
      grid_ = absl::StrCat(Low(r.a[0]), ",", High(r.a[0]), ",", Low(r.a[1]));
      block_ = absl::StrCat(High(r.a[1]), ",", Low(r.a[2]), ",", High(r.a[2]));
      String("grid", grid_);
      String("block", block_);
      Int("static_shared_bytes", Low(r.a[3]));
      Uint("dynamic_shared_bytes", static_cast<uint32_t>(High(r.a[3])));
      Uint("registers_per_thread", r.b[1]);
      Uint("correlation_id", r.b[0]);
      if (r.b[2] != 0) Uint("graph_id", r.b[2]);
      break;
    case RecordKind::kGpuMemcpy: {
      event->category = SliceCategory::kGpu;
      const uint32_t direction = r.b[1] & 0xff;
      Uint("bytes", r.a[0]);
      String("direction", DirectionName(direction));
      String("src_kind", MemoryKindName((r.b[1] >> 8) & 0xff));
      String("dst_kind", MemoryKindName((r.b[1] >> 16) & 0xff));
      Bool("async", ((r.b[1] >> 24) & 1) != 0);
      Uint("correlation_id", r.b[0]);
      if (direction == v1::MEMCPY_PTOP) {
        Uint("src_device", r.b[2]);
        Uint("dst_device", r.b[3]);
      }
      if (r.a[1] != 0) Uint("graph_id", r.a[1]);
      break;
    }
    case RecordKind::kGpuMemset:
      event->category = SliceCategory::kGpu;
      Uint("bytes", r.a[0]);
      Uint("value", r.b[1]);
      String("memory_kind", MemoryKindName(r.b[2] & 0xff));
      Bool("async", ((r.b[2] >> 8) & 1) != 0);
      Uint("correlation_id", r.b[0]);
      if (r.a[1] != 0) Uint("graph_id", r.a[1]);
      break;
    case RecordKind::kGpuSync:
      event->category = SliceCategory::kCuda;
      String("kind", SyncKindName(r.b[1]));
      Uint("correlation_id", r.b[0]);
      Uint("context", r.a[0]);
      Uint("stream", r.b[2]);
      if (r.b[3] != 0) Uint("cuda_event_id", r.b[3]);
      break;
    case RecordKind::kStep:
      event->category = SliceCategory::kStep;
      Int("index", static_cast<int64_t>(r.a[0]));
      break;
    case RecordKind::kCaptureWindow:
      event->category = SliceCategory::kCuda;
      break;
    case RecordKind::kAttachWindow: {
      event->category = SliceCategory::kProcess;
      const v1::AttachInfo& attach = header_.attach();
      target_pids_.clear();
      for (uint32_t pid : attach.target_pids()) {
        absl::StrAppend(&target_pids_, target_pids_.empty() ? "" : ",", pid);
      }
      String("target_pids", target_pids_);
      Bool("gpu_procs", attach.gpu_procs());
      if (attach.requested_duration_ns() != 0) Uint("requested_duration_ns", attach.requested_duration_ns());
      break;
    }
    case RecordKind::kExec:
      event->category = SliceCategory::kProcess;
      String("filename", strings_.Get(r.b[0]));
      break;
    case RecordKind::kProcessExit: {
      event->category = SliceCategory::kProcess;
      const int32_t status = static_cast<int32_t>(r.b[0]);
      if ((status & 0x7f) == 0) {
        Int("exit_code", (status >> 8) & 0xff);
      } else {
        Int("signal", status & 0x7f);
      }
      break;
    }
    case RecordKind::kPageFaults:
      event->category = SliceCategory::kOs;
      Uint("count", r.b[0]);
      Uint("major", r.b[1]);
      break;
    case RecordKind::kWakeup:
      event->category = SliceCategory::kSched;
      Uint(r.b[1] == 0 ? "wakee_tid" : "waker_tid", r.b[0]);
      break;
  }
  event->args = absl::MakeConstSpan(args_);
}

}  // namespace gpuos
