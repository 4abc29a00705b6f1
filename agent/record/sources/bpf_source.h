// What one event source is: a BPF program (bpf/<name>.bpf.c, with its record
// layouts in bpf/<name>.h) and its user side here, in one module
// (sources/<name>_source.cc): opening and configuring its object, its own
// maps, the links it makes by hand, and the decoding of its records into
// gpuos.v1.Events.  The modules are listed once (sources/source_list.cc);
// BpfSession loads the listed ones and keeps what they share (the ring
// buffer, the traced set, drop counts), event_decoder.cc decodes records
// through their kinds.  Adding a source: bpf/<name>.bpf.c and bpf/<name>.h,
// its record kind in bpf/event_header.h, its module here, one line in
// source_list.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "gpuos_trace.pb.h"

struct bpf_object_open_opts;
struct bpf_object_skeleton;
struct bpf_link;

namespace gpuos {

struct BpfSessionOptions;

// Called with each raw ring-buffer record (bpf/event_header.h layout).
using BpfRecordHandler = std::function<void(const void* data, size_t size)>;

// What a source's Open() is given.
struct BpfSourceSetup {
  const BpfSessionOptions& options;
  const bpf_object_open_opts* open_opts;
  // Every program's rodata wakeup_bytes (bpf/common.bpf.h).
  uint64_t wakeup_bytes;
};

class BpfSource {
 public:
  virtual ~BpfSource() = default;
  // Opens the object, not loading it, and sets what its verifier should
  // see (rodata, map sizes of its own maps).
  virtual absl::Status Open(const BpfSourceSetup& setup) = 0;
  // The opened object's skeleton, which the session loads and attaches.
  virtual bpf_object_skeleton* skeleton() const = 0;
  // Runs once the object is loaded, before any program is attached.
  virtual absl::Status AfterLoad() { return absl::OkStatus(); }
  // Hands over the links made by hand (not the skeleton's), to be closed
  // with every other.
  virtual void TakeLinks(std::vector<bpf_link*>* links, std::vector<int>* link_fds) {}
  // Whether records wait in its maps for threads that live on (sent later
  // by the kernel side, or by Drain once detached).
  virtual bool HoldsRecords() const { return false; }
  // Once detached: hands `handler` what is still held in its maps, as the
  // records it would have become.
  virtual void Drain(const BpfRecordHandler& handler) {}
  // Frees the map entries of threads that have exited.
  virtual void ForgetThreads(const std::vector<uint32_t>& tids) {}
};

using RecordEmit = absl::FunctionRef<void(v1::Event&)>;

// One record kind of a source (enum gpuos_event_kind).
struct BpfRecordKind {
  uint32_t kind;
  const char* name;  // in drop reports ("ringbuf:<name>")
  // Decodes a record of this kind whose header is already in *event
  // (ts_ns, pid, tid); calls emit once per event it holds.  False when the
  // record is shorter than its layout says: then it emits nothing.
  bool (*decode)(const void* data, size_t size, v1::Event* event, RecordEmit emit);
};

// A map of a source whose insertions can fail when full (enum gpuos_map_id).
struct BpfMapName {
  uint32_t id;
  const char* name;  // in drop reports ("map_full:<name>")
};

struct BpfSourceModule {
  const char* name;
  std::vector<BpfRecordKind> kinds;
  std::vector<BpfMapName> maps;
  // Makes the source, for BpfSession::Start to load; null for a source
  // loaded on demand by its own owner (the CUDA and torch uprobes).
  std::unique_ptr<BpfSource> (*create)();
  // Whether a failure to load or attach it (a tracepoint this kernel lacks)
  // leaves it off, with a warning, instead of failing the recording.
  bool optional = false;
  // Attached before the others: its programs run first at a tracepoint
  // they share with another source's.
  bool attach_first = false;
};

// Every source, in load order, which is also the attach order but for
// those marked attach_first: the first one's object creates the maps every
// program shares (bpf/common.bpf.h).
const std::vector<const BpfSourceModule*>& BpfSourceModules();

// The record at `data` as a T, or null when `size` is too short for it.
template <typename T>
const T* RecordAs(const void* data, size_t size) {
  return size >= sizeof(T) ? static_cast<const T*>(data) : nullptr;
}

// A clear error for a failed libbpf call (`what` says what was tried),
// with libbpf's last message.
absl::Status BpfLoadError(const std::string& what, int err);

}  // namespace gpuos
