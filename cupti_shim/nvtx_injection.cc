// NVTX recording without CUDA: the shim is the process's NVTX injection
// library (NVTX_INJECTION64_PATH names it).  NVTX calls InitializeInjectionNvtx2
// once, and we fill its function tables with our handlers, so every range,
// mark and domain the application (or PyTorch) makes reaches us with no GPU,
// no CUPTI and no code change.  Timestamps are CLOCK_MONOTONIC, like every
// other event.
//
// In a process prepared for attach (shim_control_server.h) the handlers are
// installed but record nothing until an agent attaches: a detached call
// costs an atomic load (and, for push/pop, keeping the nesting straight).
// A range is recorded when the shim was attached both when it began and
// when it ended; one that straddles attach or detach is left out whole.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <cwchar>
#include <memory>
#include <unistd.h>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench_marks_toggle.h"
#include "capture_control.h"
#include "shim_control_server.h"
#include "event_channel.h"
#include "wire_encoder.h"

namespace gpuos_shim {
namespace {

// What nvtxDomainCreate and nvtxDomainRegisterString hand out: pointers to
// these, kept for the life of the process (NVTX handles may outlive any scope).
struct Domain {
  std::string name;
};
struct RegisteredString {
  std::string text;
};

std::string Utf8(const wchar_t* text) {
  std::string out;
  if (!text) return out;
  for (; *text; ++text) {
    uint32_t c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x110000) {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

struct Attributes {
  std::string name;
  uint32_t color = 0;
  uint32_t category = 0;
};

// The makers below fill an Attributes in place, so that a range stack slot
// keeps its name's memory from one push to the next.
void FromAttributes(const nvtxEventAttributes_t* attr, Attributes* out) {
  out->name.clear();
  out->color = 0;
  out->category = 0;
  if (!attr) return;
  switch (attr->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      if (attr->message.ascii) out->name.assign(attr->message.ascii);
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      out->name = Utf8(attr->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      if (attr->message.registered) {
        out->name.assign(reinterpret_cast<const RegisteredString*>(attr->message.registered)->text);
      }
      break;
    default:
      break;
  }
  if (attr->colorType == NVTX_COLOR_ARGB) out->color = attr->color;
  out->category = attr->category;
}

void FromText(const char* text, Attributes* out) {
  if (text) {
    out->name.assign(text);
  } else {
    out->name.clear();
  }
  out->color = 0;
  out->category = 0;
}

void FromWide(const wchar_t* text, Attributes* out) {
  out->name = Utf8(text);
  out->color = 0;
  out->category = 0;
}

// Domains are interned by name (DomainCreate below), so that one pointer
// comparison tells whether two handles name the same domain, as NVTX
// means it; a domain named "" is the default one.
const Domain* AsDomain(nvtxDomainHandle_t handle) {
  const Domain* domain = reinterpret_cast<const Domain*>(handle);
  return domain != nullptr && domain->name.empty() ? nullptr : domain;
}

nvtxDomainHandle_t InternDomain(std::string name) {
  static std::mutex mu;
  static auto* domains = new std::unordered_map<std::string, Domain*>();  // never freed: handles outlive everything
  std::lock_guard<std::mutex> lock(mu);
  Domain*& domain = (*domains)[name];
  if (domain == nullptr) domain = new Domain{std::move(name)};
  return reinterpret_cast<nvtxDomainHandle_t>(domain);
}

std::string_view DomainName(const Domain* domain) {
  return domain ? std::string_view(domain->name) : std::string_view();
}

// Push/pop ranges nest per thread.  A range pushed while detached is kept
// on the stack with start_ns 0, so that pops still match and depths stay
// right, and is never emitted.
struct OpenRange {
  uint64_t start_ns = 0;
  const Domain* domain = nullptr;  // nullptr: the default domain
  Attributes attributes;
};

// A thread's open push/pop ranges, innermost last.  Popped slots stay
// allocated past `size`, with their name's memory, for the next push: a
// mark in a training step should not have to call malloc.  A slot never
// moves, so a reference to one stays good across a later push.
struct RangeStack {
  std::vector<std::unique_ptr<OpenRange>> slots;
  size_t size = 0;

  OpenRange& Push() {
    if (size == slots.size()) slots.push_back(std::make_unique<OpenRange>());
    return *slots[size++];
  }
  // Removes slot i, keeping the slots above it in order.
  void Remove(size_t i) {
    std::rotate(slots.begin() + static_cast<std::ptrdiff_t>(i), slots.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                slots.begin() + static_cast<std::ptrdiff_t>(size));
    --size;
  }
};

// Whether to record now; in a fork child of a prepared process, the first
// NVTX call also brings its control listener up (shim_control_server.h).
bool Recording() {
  if (ChannelConfigured()) return true;
  RestartListenerIfForked();
  return false;
}
// A thread's marking state: its range stack.
struct ThreadMarks {
  RangeStack stack;
  ~ThreadMarks();
};

// Set once the thread's ThreadMarks is destroyed.  A thread's (or, at
// exit(), the main thread's) thread-locals go before other libraries'
// destructors and atexit handlers, which may still make NVTX calls; a
// trivially destructible flag stays readable until the thread is gone.
thread_local bool t_marks_gone = false;
thread_local ThreadMarks t_marks;
ThreadMarks::~ThreadMarks() { t_marks_gone = true; }

// This thread's state, or nullptr once it is gone (push/pop then record
// nothing; marks and start/end ranges need no thread state).
ThreadMarks* Marks() { return t_marks_gone ? nullptr : &t_marks; }

// Start/end ranges may end on another thread: keyed by the id we return.
std::mutex g_started_mu;
std::unordered_map<uint64_t, std::pair<OpenRange, uint32_t>>* g_started =
    new std::unordered_map<uint64_t, std::pair<OpenRange, uint32_t>>();
std::atomic<uint64_t> g_next_range_id{1};

// A range or mark as the thread that makes it hands it over: this header,
// then the name's bytes, then the domain's.  The sender thread encodes it
// (EncodeNvtxRecord), so that a training step's marks cost it a copy.
struct NvtxRecord {
  enum Kind : uint32_t { kPushPop = 0, kStartEnd = 1, kMark = 2 };  // NvtxRange.Kind, then a mark
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // a mark: start_ns
  uint32_t pid = 0;
  uint32_t start_tid = 0;
  uint32_t end_tid = 0;
  uint32_t kind = kPushPop;
  uint32_t depth = 0;
  uint32_t color = 0;
  uint32_t category = 0;
  uint32_t name_size = 0;
  uint32_t domain_size = 0;
};

void EncodeNvtxRecord(std::string_view record, ProtoWriter* event) {
  NvtxRecord r;
  memcpy(&r, record.data(), sizeof(r));
  const std::string_view name = record.substr(sizeof(r), r.name_size);
  const std::string_view domain = record.substr(sizeof(r) + r.name_size, r.domain_size);
  ProtoWriter payload;  // on the sender's thread, or one flushing at exit
  if (r.kind == NvtxRecord::kMark) {
    payload.Text(field::kNvtxMarkName, name);
    payload.Text(field::kNvtxMarkDomain, domain);
    EncodeEventInto(r.start_ns, r.pid, r.start_tid, field::kEventNvtxMark, payload, event);
    return;
  }
  payload.Uint(field::kNvtxRangeDuration, r.end_ns - r.start_ns);
  payload.Text(field::kNvtxRangeName, name);
  payload.Text(field::kNvtxRangeDomain, domain);
  payload.Uint(field::kNvtxRangeKind, r.kind);
  payload.Uint(field::kNvtxRangeDepth, r.depth);
  if (r.end_tid != r.start_tid) payload.Uint(field::kNvtxRangeEndTid, r.end_tid);
  payload.Uint(field::kNvtxRangeColor, r.color);
  payload.Uint(field::kNvtxRangeCategory, r.category);
  EncodeEventInto(r.start_ns, r.pid, r.start_tid, field::kEventNvtxRange, payload, event);
}

// Queues `r` with its name and domain (their sizes set here).
void SubmitNvtxRecord(NvtxRecord& r, std::string_view name, std::string_view domain) {
  r.pid = CurrentPid();
  r.name_size = static_cast<uint32_t>(name.size());
  r.domain_size = static_cast<uint32_t>(domain.size());
  SubmitDeferred(EncodeNvtxRecord, {std::string_view(reinterpret_cast<const char*>(&r), sizeof(r)), name, domain});
}

void EmitRange(const OpenRange& range, uint64_t end_ns, uint32_t start_tid, uint32_t end_tid,
               NvtxRecord::Kind kind, uint32_t depth) {
  NvtxRecord r;
  r.start_ns = range.start_ns;
  r.end_ns = end_ns;
  r.start_tid = start_tid;
  r.end_tid = end_tid;
  r.kind = kind;
  r.depth = depth;
  r.color = range.attributes.color;
  r.category = range.attributes.category;
  SubmitNvtxRecord(r, range.attributes.name, DomainName(range.domain));
}

template <typename MakeAttributes>
void Mark(nvtxDomainHandle_t domain, MakeAttributes make) {
  if (!Recording()) return;
  const uint64_t now = MonotonicNs();
  if (BenchMarksPaused(now)) return;
  Attributes attributes;
  make(&attributes);
  NvtxRecord r;
  r.start_ns = r.end_ns = now;
  r.start_tid = r.end_tid = CurrentTid();
  r.kind = NvtxRecord::kMark;
  SubmitNvtxRecord(r, attributes.name, DomainName(AsDomain(domain)));
}

template <typename MakeAttributes>
int Push(nvtxDomainHandle_t handle, MakeAttributes make) {
  ThreadMarks* marks = Marks();
  if (marks == nullptr) return -1;  // the thread is going away: nothing to nest in
  const Domain* domain = AsDomain(handle);
  RangeStack& stack = marks->stack;
  int depth = 0;
  for (size_t i = 0; i < stack.size; ++i) depth += stack.slots[i]->domain == domain;
  const uint64_t now = Recording() ? MonotonicNs() : 0;
  OpenRange& range = stack.Push();
  range.domain = domain;
  if (now != 0 && !BenchMarksPaused(now)) {
    range.start_ns = now;
    make(&range.attributes);
    CaptureOnRangeBegin(DomainName(domain), range.attributes.name, now, CurrentTid());
  } else {
    range.start_ns = 0;
  }
  return depth;
}

int Pop(nvtxDomainHandle_t handle) {
  ThreadMarks* marks = Marks();
  if (marks == nullptr) return -1;
  const Domain* domain = AsDomain(handle);
  RangeStack& stack = marks->stack;
  // Pops match the innermost push of the same domain; NVTX keeps one stack
  // per domain, so find the last open range of this domain.
  for (size_t i = stack.size; i-- > 0;) {
    const OpenRange& range = *stack.slots[i];
    if (range.domain != domain) continue;
    uint32_t depth = 0;  // open ranges of the same domain below this one
    for (size_t j = 0; j < i; ++j) depth += stack.slots[j]->domain == domain;
    // Begun while detached, or detached since: not recorded.
    const bool recorded = range.start_ns != 0 && ChannelConfigured();
    const uint64_t now = recorded ? MonotonicNs() : 0;  // no clock read for a range not recorded
    const uint32_t tid = CurrentTid();
    if (recorded) EmitRange(range, now, tid, tid, NvtxRecord::kPushPop, depth);
    // Off the stack before the capture hears of it; the slot itself (past
    // the stack now) keeps the name until the next push.
    stack.Remove(i);
    if (recorded) CaptureOnRangeEnd(DomainName(domain), range.attributes.name, now, tid);
    return static_cast<int>(depth);
  }
  return -1;  // unbalanced pop: NVTX's own convention
}

template <typename MakeAttributes>
nvtxRangeId_t Start(nvtxDomainHandle_t domain, MakeAttributes make) {
  uint64_t id = g_next_range_id.fetch_add(1);
  // Detached: the id is never stored, so its End finds nothing to emit.
  if (!Recording()) return id;
  const uint64_t now = MonotonicNs();
  if (BenchMarksPaused(now)) return id;
  OpenRange range;
  range.start_ns = now;
  range.domain = AsDomain(domain);
  make(&range.attributes);
  CaptureOnRangeBegin(DomainName(range.domain), range.attributes.name, range.start_ns, CurrentTid());
  std::lock_guard<std::mutex> lock(g_started_mu);
  g_started->emplace(id, std::make_pair(std::move(range), CurrentTid()));
  return id;
}

void End(nvtxRangeId_t id) {
  // Ranges started while attached are still removed after a detach.
  uint64_t now = MonotonicNs();
  std::pair<OpenRange, uint32_t> started;
  {
    std::lock_guard<std::mutex> lock(g_started_mu);
    auto it = g_started->find(id);
    if (it == g_started->end()) return;
    started = std::move(it->second);
    g_started->erase(it);
  }
  EmitRange(started.first, now, started.second, CurrentTid(), NvtxRecord::kStartEnd, 0);
  CaptureOnRangeEnd(DomainName(started.first.domain), started.first.attributes.name, now, CurrentTid());
}

// ---- NVTX entry points (core module) ----
void NVTX_API MarkEx(const nvtxEventAttributes_t* a) {
  Mark(nullptr, [a](Attributes* out) { FromAttributes(a, out); });
}
void NVTX_API MarkA(const char* m) { Mark(nullptr, [m](Attributes* out) { FromText(m, out); }); }
void NVTX_API MarkW(const wchar_t* m) { Mark(nullptr, [m](Attributes* out) { FromWide(m, out); }); }
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  return Start(nullptr, [a](Attributes* out) { FromAttributes(a, out); });
}
nvtxRangeId_t NVTX_API RangeStartA(const char* m) { return Start(nullptr, [m](Attributes* out) { FromText(m, out); }); }
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* m) {
  return Start(nullptr, [m](Attributes* out) { FromWide(m, out); });
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { End(id); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  return Push(nullptr, [a](Attributes* out) { FromAttributes(a, out); });
}
int NVTX_API RangePushA(const char* m) { return Push(nullptr, [m](Attributes* out) { FromText(m, out); }); }
int NVTX_API RangePushW(const wchar_t* m) { return Push(nullptr, [m](Attributes* out) { FromWide(m, out); }); }
int NVTX_API RangePop() { return Pop(nullptr); }
void NVTX_API NameCategoryA(uint32_t, const char*) {}
void NVTX_API NameCategoryW(uint32_t, const wchar_t*) {}
void NVTX_API NameOsThreadA(uint32_t, const char*) {}
void NVTX_API NameOsThreadW(uint32_t, const wchar_t*) {}

// ---- NVTX entry points (core2 module: domains) ----
void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Mark(d, [a](Attributes* out) { FromAttributes(a, out); });
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return Start(d, [a](Attributes* out) { FromAttributes(a, out); });
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { End(id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return Push(d, [a](Attributes* out) { FromAttributes(a, out); });
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) { return Pop(d); }
nvtxResourceHandle_t NVTX_API DomainResourceCreate(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
  return nullptr;
}
void NVTX_API DomainResourceDestroy(nvtxResourceHandle_t) {}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t, uint32_t, const char*) {}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t, uint32_t, const wchar_t*) {}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(new RegisteredString{s ? s : ""});
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  return reinterpret_cast<nvtxStringHandle_t>(new RegisteredString{Utf8(s)});
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  return InternDomain(name ? name : "");
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  return InternDomain(Utf8(name));
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: events may still name them
void NVTX_API Initialize(const void*) {}

template <typename Fn>
void Install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace
}  // namespace gpuos_shim

using namespace gpuos_shim;

// Called once by NVTX in every process that makes its first NVTX call with
// NVTX_INJECTION64_PATH pointing here.  Returning 0 would switch NVTX off
// for the process; we do so only when no agent is listening and none can
// attach (neither launched nor prepared).
extern "C" __attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if ((!ChannelConfigured() && !AttachPossible()) || !get_export_table) return 0;
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable) {
    return 0;
  }
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
    Install(table, size, NVTX_CBID_CORE_MarkEx, MarkEx);
    Install(table, size, NVTX_CBID_CORE_MarkA, MarkA);
    Install(table, size, NVTX_CBID_CORE_MarkW, MarkW);
    Install(table, size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
    Install(table, size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
    Install(table, size, NVTX_CBID_CORE_RangeStartW, RangeStartW);
    Install(table, size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
    Install(table, size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
    Install(table, size, NVTX_CBID_CORE_RangePushA, RangePushA);
    Install(table, size, NVTX_CBID_CORE_RangePushW, RangePushW);
    Install(table, size, NVTX_CBID_CORE_RangePop, RangePop);
    Install(table, size, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
    Install(table, size, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
    Install(table, size, NVTX_CBID_CORE_NameOsThreadA, NameOsThreadA);
    Install(table, size, NVTX_CBID_CORE_NameOsThreadW, NameOsThreadW);
  }
  table = nullptr;
  size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
    Install(table, size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
    Install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
    Install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
    Install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
    Install(table, size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
    Install(table, size, NVTX_CBID_CORE2_DomainResourceCreate, DomainResourceCreate);
    Install(table, size, NVTX_CBID_CORE2_DomainResourceDestroy, DomainResourceDestroy);
    Install(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
    Install(table, size, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
    Install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
    Install(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
    Install(table, size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
    Install(table, size, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
    Install(table, size, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
    Install(table, size, NVTX_CBID_CORE2_Initialize, Initialize);
  }
  SetNvtxActive();
  return 1;
}

// Ranges for gpuos-trace's Python start-up hook (agent/python_hooks/), which
// calls these (through its C extension, or ctypes) in processes that have
// the shim preloaded.
// They go to the domain "gpuos.python" and work with no NVTX library, no
// CUDA and no change to the script.
namespace {
// Interned like any domain: a script's own "gpuos.python" ranges share the
// hook's stack, as NVTX would have them.
nvtxDomainHandle_t PythonDomain() {
  static const nvtxDomainHandle_t domain = InternDomain("gpuos.python");
  return domain;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int gpuos_shim_python_push(const char* name) {
  if (!ChannelConfigured() && !AttachPossible()) return -1;
  return Push(PythonDomain(), [name](Attributes* out) { FromText(name, out); });
}

extern "C" __attribute__((visibility("default"))) int gpuos_shim_python_pop() {
  if (!ChannelConfigured() && !AttachPossible()) return -1;
  return Pop(PythonDomain());
}
