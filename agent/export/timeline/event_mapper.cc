// EventMapper and RecordDescriber: see timeline/event_mapper.h.
#include "export/timeline/event_mapper.h"

#include "export/timeline/kinds/process_kinds.h"

namespace gpuos {

EventMapper::EventMapper(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
                         FlowTable* flows, RecordSorter* sorter)
    : context_(header, tracks, strings, flows, sorter) {
  for (size_t kind = 0; kind < kRecordKindCount; ++kind) {
    const RecordKindInfo& info = KindInfo(static_cast<RecordKind>(kind));
    if (info.map == nullptr) continue;
    const size_t source = static_cast<size_t>(info.source);
    if (source >= mappings_.size()) mappings_.resize(source + 1, nullptr);
    mappings_[source] = info.map;
  }
}

bool EventMapper::AddNames(const v1::Event& event, uint32_t tid) {
  const uint32_t pid = event.pid();
  const v1::TraceHeader& header = context_.header();
  TrackTable& tracks = context_.tracks();
  switch (event.payload_case()) {
    case v1::Event::kProcessStart: {
      const v1::ProcessStart& start = event.process_start();
      tracks.SetProcessName(pid, start.comm());
      tracks.SetThreadName(pid, pid, start.comm());
      if (start.is_root() && header.command_line_size() > 0) {
        tracks.SetProcessCmdline(pid, {header.command_line().begin(), header.command_line().end()});
      }
      return true;
    }
    case v1::Event::kThreadStart:
      tracks.SetThreadName(pid, tid, event.thread_start().comm());
      return true;
    case v1::Event::kCommChange:
      tracks.SetThreadName(pid, tid, event.comm_change().new_comm());
      if (tid == pid) tracks.SetProcessName(pid, event.comm_change().new_comm());
      return true;
    case v1::Event::kThreadExit:
      tracks.SetThreadName(pid, tid, event.thread_exit().comm());
      return true;
    case v1::Event::kFutexWakes:
    case v1::Event::kSyscallStats:
      // Cumulative totals: the report shows them; a timeline has no place.
      tracks.Thread(pid, tid);
      return true;
    case v1::Event::kRankInfo:
      if (event.rank_info().has_rank()) {
        tracks.SetRank(pid, event.rank_info().rank(),
                       event.rank_info().has_world_size() ? event.rank_info().world_size() : -1);
      }
      return true;
    default:
      return false;
  }
}

absl::Status EventMapper::Add(const v1::Event& event) {
  ++events_;
  const uint32_t pid = event.pid();
  // Only the tracer's own accounting has no process; nothing to draw.
  if (pid == 0) return absl::OkStatus();
  context_.MarkSeen(pid);
  // Events of a thread that name none belong to the main thread.
  const uint32_t tid = event.tid() != 0 ? event.tid() : pid;
  if (AddNames(event, tid)) return absl::OkStatus();
  // Kinds without a mapping (tracer and shim statistics, capture window
  // edges: AddCaptureWindow) draw nothing.
  const size_t source = static_cast<size_t>(event.payload_case());
  if (source >= mappings_.size() || mappings_[source] == nullptr) return absl::OkStatus();
  return mappings_[source](event, context_);
}

absl::Status EventMapper::AddStep(const StepSpan& step) { return StepKind::Add(step, context_); }

absl::Status EventMapper::AddAttachWindow(uint64_t start_ns, uint64_t end_ns) {
  return AttachWindowKind::Add(start_ns, end_ns, context_);
}

absl::Status EventMapper::AddCaptureWindow(uint32_t pid, uint64_t start_ns, uint64_t end_ns,
                                           const std::string& reason, bool cupti_subscribed) {
  return CaptureWindowKind::Add(pid, start_ns, end_ns, reason, cupti_subscribed, context_);
}

RecordDescriber::RecordDescriber(const v1::TraceHeader& header, const StringTable& strings)
    : strings_(strings), args_(header, strings) {}

void RecordDescriber::Describe(const TimelineRecord& record, SliceEvent* event) {
  const RecordKindInfo& info = KindInfo(record.kind);
  args_.Clear();
  event->name_id = record.name;
  event->name = strings_.Get(record.name);
  event->category = info.category;
  info.describe(record, args_);
  event->args = args_.args();
}

}  // namespace gpuos
