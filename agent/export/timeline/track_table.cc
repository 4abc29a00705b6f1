// TrackTable: see timeline/track_table.h.
#include "export/timeline/track_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuos {

uint32_t TrackTable::Add(Track track) {
  const uint32_t index = static_cast<uint32_t>(tracks_.size());
  // uuids only need to be unique within the trace; small ones encode short.
  track.uuid = index + 1;
  if (track.lane == 0) track.base = index;
  if (track.json_pid == 0) track.json_pid = track.pid != 0 ? track.pid : kJsonGlobalPid;
  if (track.json_tid == 0) track.json_tid = kJsonSyntheticTidBase + index;
  tracks_.push_back(std::move(track));
  if (sealed_) NameChild(tracks_.back());
  return index;
}

uint32_t TrackTable::Process(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second;
  Track track;
  track.kind = TrackKind::kProcess;
  track.pid = pid;
  track.json_tid = pid;
  const uint32_t index = Add(std::move(track));
  processes_.emplace(pid, index);
  return index;
}

uint32_t TrackTable::Thread(uint32_t pid, uint32_t tid) {
  const uint64_t key = (static_cast<uint64_t>(pid) << 32) | tid;
  auto it = threads_.find(key);
  if (it != threads_.end()) return it->second;
  Process(pid);
  Track track;
  track.kind = TrackKind::kThread;
  track.pid = pid;
  track.tid = tid;
  track.json_tid = tid;
  const uint32_t index = Add(std::move(track));
  threads_.emplace(key, index);
  return index;
}

uint32_t TrackTable::ThreadChild(uint32_t pid, uint32_t tid, TrackKind kind) {
  const uint32_t thread = Thread(pid, tid);
  const auto key = std::make_tuple(static_cast<uint64_t>(thread), static_cast<uint8_t>(kind));
  auto it = children_.find(key);
  if (it != children_.end()) return it->second;
  Track track;
  track.kind = kind;
  track.pid = pid;
  track.tid = tid;
  track.parent_uuid = tracks_[thread].uuid;
  const uint32_t index = Add(std::move(track));
  children_.emplace(key, index);
  return index;
}

uint32_t TrackTable::GpuStream(uint32_t pid, uint32_t device, uint32_t context,
                               uint32_t stream) {
  const auto key = std::make_tuple(pid, device, context, stream);
  auto it = streams_.find(key);
  if (it != streams_.end()) return it->second;
  const uint32_t process = Process(pid);
  Track track;
  track.kind = TrackKind::kGpuStream;
  track.pid = pid;
  track.device = device;
  track.context = context;
  track.stream = stream;
  track.parent_uuid = tracks_[process].uuid;
  const uint32_t index = Add(std::move(track));
  streams_.emplace(key, index);
  return index;
}

uint32_t TrackTable::ProcessChild(uint32_t pid, TrackKind kind) {
  // Process children are keyed apart from thread children by the high bit.
  const auto key = std::make_tuple((1ull << 63) | pid, static_cast<uint8_t>(kind));
  auto it = children_.find(key);
  if (it != children_.end()) return it->second;
  const uint32_t process = Process(pid);
  Track track;
  track.kind = kind;
  track.pid = pid;
  track.parent_uuid = tracks_[process].uuid;
  const uint32_t index = Add(std::move(track));
  children_.emplace(key, index);
  return index;
}

uint32_t TrackTable::NamedProcessChild(uint32_t pid, std::string_view name) {
  auto key = std::make_tuple(pid, std::string(name));
  auto it = named_.find(key);
  if (it != named_.end()) return it->second;
  const uint32_t process = Process(pid);
  Track track;
  track.kind = TrackKind::kNamed;
  track.pid = pid;
  track.name = std::string(name);
  track.parent_uuid = tracks_[process].uuid;
  const uint32_t index = Add(std::move(track));
  named_.emplace(std::move(key), index);
  return index;
}

uint32_t TrackTable::Steps(uint32_t pid) {
  if (pid != 0) return ProcessChild(pid, TrackKind::kSteps);
  const auto key = std::make_tuple(uint64_t{0}, static_cast<uint8_t>(TrackKind::kSteps));
  auto it = children_.find(key);
  if (it != children_.end()) return it->second;
  Track track;
  track.kind = TrackKind::kSteps;
  const uint32_t index = Add(std::move(track));
  children_.emplace(key, index);
  return index;
}

uint32_t TrackTable::AttachWindow() {
  const auto key = std::make_tuple(uint64_t{0}, static_cast<uint8_t>(TrackKind::kAttachWindow));
  auto it = children_.find(key);
  if (it != children_.end()) return it->second;
  Track track;
  track.kind = TrackKind::kAttachWindow;
  const uint32_t index = Add(std::move(track));
  children_.emplace(key, index);
  return index;
}

uint32_t TrackTable::Counter(CounterKind kind, uint32_t pid_or_device) {
  const auto key = std::make_tuple(static_cast<uint8_t>(kind), pid_or_device);
  auto it = counters_.find(key);
  if (it != counters_.end()) return it->second;
  Track track;
  track.kind = TrackKind::kCounter;
  track.counter = kind;
  if (kind == CounterKind::kGpuBusyPercent) {
    track.device = pid_or_device;
  } else {
    track.pid = pid_or_device;
    track.parent_uuid = tracks_[Process(pid_or_device)].uuid;
  }
  const uint32_t index = Add(std::move(track));
  counters_.emplace(key, index);
  return index;
}

uint32_t TrackTable::Lane(uint32_t base, uint32_t n) {
  if (n == 0) return base;
  const auto key = std::make_tuple(base, n);
  auto it = lanes_.find(key);
  if (it != lanes_.end()) return it->second;
  Track track = tracks_[base];
  track.base = base;
  track.lane = n;
  track.cmdline.clear();
  // A lane of a thread track hangs off the thread; other lanes are siblings
  // of their base track.
  if (track.kind == TrackKind::kThread) track.parent_uuid = tracks_[base].uuid;
  track.json_tid = 0;
  const uint32_t index = Add(std::move(track));
  lanes_.emplace(key, index);
  return index;
}

void TrackTable::SetProcessName(uint32_t pid, std::string_view name) {
  if (name.empty()) return;
  tracks_[Process(pid)].name = std::string(name);
}

void TrackTable::SetProcessCmdline(uint32_t pid, std::vector<std::string> cmdline) {
  tracks_[Process(pid)].cmdline = std::move(cmdline);
}

void TrackTable::SetThreadName(uint32_t pid, uint32_t tid, std::string_view name) {
  if (name.empty()) return;
  tracks_[Thread(pid, tid)].name = std::string(name);
}

void TrackTable::SetRank(uint32_t pid, int32_t rank, int32_t world_size) {
  rank_labels_[pid] = world_size > 0 ? absl::StrCat("rank ", rank, "/", world_size) : absl::StrCat("rank ", rank);
}

void TrackTable::SetHosts(std::vector<std::string> host_names, uint32_t pid_stride) {
  host_names_ = std::move(host_names);
  pid_stride_ = pid_stride;
}

void TrackTable::NameChild(Track& track) const {
  switch (track.kind) {
    case TrackKind::kProcess:
      if (track.name.empty()) track.name = absl::StrCat("pid ", track.pid);
      if (auto rank = rank_labels_.find(track.pid); rank != rank_labels_.end()) {
        track.name = absl::StrCat(rank->second, " ", track.name);
      }
      if (pid_stride_ > 0 && track.pid / pid_stride_ < host_names_.size()) {
        track.name = absl::StrCat("[", host_names_[track.pid / pid_stride_], "] ", track.name);
      }
      break;
    case TrackKind::kThread:
      if (track.lane > 0) {
        track.name = absl::StrCat(track.tid, " overlap");
      } else if (track.name.empty()) {
        track.name = absl::StrCat("tid ", track.tid);
      }
      break;
    case TrackKind::kThreadOs:
      track.name = absl::StrCat(track.tid, " OS");
      break;
    case TrackKind::kThreadOffCpu:
      track.name = absl::StrCat(track.tid, " off-CPU");
      break;
    case TrackKind::kGpuStream:
      track.name = absl::StrCat("GPU ", track.device, " stream ", track.stream, " (context ",
                                track.context, ")");
      break;
    case TrackKind::kGpuSync:
      track.name = "CUDA sync waits";
      break;
    case TrackKind::kNvtxAsync:
      track.name = "NVTX ranges";
      break;
    case TrackKind::kSteps:
      track.name = "steps";
      break;
    case TrackKind::kAttachWindow:
      track.name = "attach window";
      break;
    case TrackKind::kCaptureWindows:
      track.name = "capture windows";
      break;
    case TrackKind::kNamed:
      break;  // named when created
    case TrackKind::kCounter:
      switch (track.counter) {
        case CounterKind::kGpuBusyPercent:
          track.name = absl::StrCat("GPU ", track.device, " busy %");
          break;
        case CounterKind::kPageFaultsPerSecond:
          track.name = "page faults/s";
          break;
        case CounterKind::kContextSwitchesPerSecond:
          track.name = "context switches/s";
          break;
      }
      break;
  }
}

void TrackTable::Seal() {
  sealed_ = true;
  for (Track& track : tracks_) NameChild(track);
}

}  // namespace gpuos
