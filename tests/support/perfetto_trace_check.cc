// PerfettoTraceChecker: see perfetto_trace_check.h.
#include "support/perfetto_trace_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"

namespace gpuos {
namespace {

namespace pp = ::perfetto::protos;
constexpr size_t kMaxViolationsKept = 20;

}  // namespace

void PerfettoTraceChecker::Violation(std::string message) {
  ++check_.violation_count;
  if (check_.violations.size() < kMaxViolationsKept) {
    check_.violations.push_back(absl::StrCat("packet ", check_.packets, ": ", message));
  }
}

void PerfettoTraceChecker::Add(const pp::TracePacket& packet) {
  ++check_.packets;
  if (!packet.has_trusted_packet_sequence_id()) {
    Violation("no trusted_packet_sequence_id");
    return;
  }
  SequenceState& sequence = sequences_[packet.trusted_packet_sequence_id()];
  const uint32_t flags = packet.sequence_flags();
  if (flags & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) {
    sequence.cleared = true;
    sequence.names.clear();
    sequence.categories.clear();
    sequence.arg_names.clear();
  } else if (!sequence.cleared) {
    Violation("first packet of a sequence does not clear incremental state");
    sequence.cleared = true;
  }
  const uint64_t ts = packet.timestamp();
  if (ts < sequence.last_ts) {
    Violation(absl::StrCat("sequence ", packet.trusted_packet_sequence_id(), " goes back in time: ",
                           ts, " after ", sequence.last_ts));
  }
  sequence.last_ts = std::max(sequence.last_ts, ts);

  if (packet.has_interned_data()) {
    if (!(flags & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE)) {
      Violation("interned data in a packet not flagged SEQ_NEEDS_INCREMENTAL_STATE");
    }
    auto intern = [&](absl::flat_hash_map<uint64_t, std::string>& map, uint64_t iid,
                      const std::string& name, const char* what) {
      if (iid == 0) Violation(absl::StrCat(what, " with iid 0"));
      auto [it, inserted] = map.emplace(iid, name);
      if (!inserted && it->second != name) {
        Violation(absl::StrCat(what, " iid ", iid, " redefined from '", it->second, "' to '",
                               name, "'"));
      }
    };
    for (const auto& entry : packet.interned_data().event_names()) {
      intern(sequence.names, entry.iid(), entry.name(), "event name");
    }
    for (const auto& entry : packet.interned_data().event_categories()) {
      intern(sequence.categories, entry.iid(), entry.name(), "category");
    }
    for (const auto& entry : packet.interned_data().debug_annotation_names()) {
      intern(sequence.arg_names, entry.iid(), entry.name(), "annotation name");
    }
  }
  if (packet.has_track_descriptor()) AddDescriptor(ts, packet.track_descriptor());
  if (packet.has_track_event()) {
    AddEvent(ts, (flags & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE) != 0, sequence,
             packet.track_event());
  }
}

void PerfettoTraceChecker::AddDescriptor(uint64_t ts, const pp::TrackDescriptor& descriptor) {
  const uint64_t uuid = descriptor.uuid();
  if (uuid == 0) {
    Violation("track descriptor without uuid");
    return;
  }
  if (descriptor.has_parent_uuid() && !tracks_.contains(descriptor.parent_uuid())) {
    Violation(absl::StrCat("track ", uuid, " described before its parent ", descriptor.parent_uuid()));
  }
  auto [it, inserted] = tracks_.try_emplace(uuid);
  if (!inserted) {
    Violation(absl::StrCat("track ", uuid, " described twice"));
    return;
  }
  TrackState& track = it->second;
  track.name = descriptor.name();
  track.last_ts = ts;
  if (descriptor.has_process()) {
    ++check_.process_tracks;
    if (descriptor.process().pid() <= 0) Violation(absl::StrCat("process track ", uuid, " without pid"));
    if (descriptor.process().process_name().empty()) {
      Violation(absl::StrCat("process track ", uuid, " without a name"));
    }
  } else if (descriptor.has_thread()) {
    ++check_.thread_tracks;
    if (descriptor.thread().pid() <= 0 || descriptor.thread().tid() <= 0) {
      Violation(absl::StrCat("thread track ", uuid, " without pid and tid"));
    }
    if (descriptor.thread().thread_name().empty()) {
      Violation(absl::StrCat("thread track ", uuid, " without a name"));
    }
  } else if (descriptor.has_counter()) {
    ++check_.counter_tracks;
    track.counter = true;
    check_.counter_values_by_track.try_emplace(track.name, 0);
  } else {
    ++check_.other_tracks;
  }
  if (track.name.empty()) Violation(absl::StrCat("track ", uuid, " without a name"));
}

void PerfettoTraceChecker::AddEvent(uint64_t ts, bool needs_state, SequenceState& sequence,
                                    const pp::TrackEvent& event) {
  auto it = tracks_.find(event.track_uuid());
  if (it == tracks_.end()) {
    Violation(absl::StrCat("event on track ", event.track_uuid(), " before its descriptor"));
    return;
  }
  TrackState& track = it->second;
  if (ts < track.last_ts) {
    Violation(absl::StrCat("track '", track.name, "' goes back in time: ", ts, " after ",
                           track.last_ts));
  }
  track.last_ts = std::max(track.last_ts, ts);

  auto resolve = [&](const absl::flat_hash_map<uint64_t, std::string>& map, uint64_t iid,
                     const char* what) -> const std::string* {
    if (!needs_state) Violation(absl::StrCat(what, " iid used without SEQ_NEEDS_INCREMENTAL_STATE"));
    auto found = map.find(iid);
    if (found == map.end()) {
      Violation(absl::StrCat(what, " iid ", iid, " not interned on this sequence"));
      return nullptr;
    }
    return &found->second;
  };
  for (uint64_t iid : event.category_iids()) resolve(sequence.categories, iid, "category");
  for (const pp::DebugAnnotation& annotation : event.debug_annotations()) {
    if (annotation.has_name_iid()) {
      resolve(sequence.arg_names, annotation.name_iid(), "annotation name");
    } else if (annotation.name().empty()) {
      Violation("debug annotation without a name");
    }
  }
  std::string name;
  if (event.has_name_iid()) {
    if (const std::string* found = resolve(sequence.names, event.name_iid(), "event name")) {
      name = *found;
    }
  } else {
    name = event.name();
  }

  switch (event.type()) {
    case pp::TrackEvent::TYPE_SLICE_BEGIN:
    case pp::TrackEvent::TYPE_INSTANT:
      if (track.counter) Violation(absl::StrCat("slice on counter track '", track.name, "'"));
      if (name.empty()) Violation(absl::StrCat("unnamed event on track '", track.name, "'"));
      ++check_.events_by_name[name];
      if (event.type() == pp::TrackEvent::TYPE_SLICE_BEGIN) {
        ++track.depth;
        ++check_.slices;
      } else {
        ++check_.instants;
      }
      break;
    case pp::TrackEvent::TYPE_SLICE_END:
      if (track.depth == 0) {
        Violation(absl::StrCat("SLICE_END without an open slice on track '", track.name, "'"));
      } else {
        --track.depth;
      }
      break;
    case pp::TrackEvent::TYPE_COUNTER:
      if (!track.counter) Violation(absl::StrCat("counter value on slice track '", track.name, "'"));
      if (!event.has_counter_value() && !event.has_double_counter_value()) {
        Violation("counter event without a value");
      }
      ++check_.counter_values;
      ++check_.counter_values_by_track[track.name];
      break;
    default:
      Violation(absl::StrCat("event of unknown type ", event.type()));
  }

  for (uint64_t id : event.flow_ids()) {
    FlowState& flow = flows_[id];
    if (++flow.starts == 1) flow.start_ts = ts;
  }
  for (uint64_t id : event.terminating_flow_ids()) {
    FlowState& flow = flows_[id];
    if (++flow.ends == 1) flow.end_ts = ts;
  }
}

PerfettoTraceCheck PerfettoTraceChecker::Finish() {
  for (const auto& [uuid, track] : tracks_) {
    if (track.depth != 0) {
      Violation(absl::StrCat(track.depth, " slice(s) left open on track '", track.name, "'"));
    }
  }
  for (const auto& [id, flow] : flows_) {
    if (flow.starts != 1 || flow.ends != 1) {
      Violation(absl::StrCat("flow ", id, " has ", flow.starts, " start(s) and ", flow.ends,
                             " end(s)"));
    } else if (flow.end_ts < flow.start_ts) {
      Violation(absl::StrCat("flow ", id, " ends before it starts"));
    } else {
      ++check_.flows;
    }
  }
  return std::move(check_);
}

absl::StatusOr<PerfettoTraceCheck> CheckPerfettoTraceFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  PerfettoTraceChecker checker;
  pp::TracePacket packet;
  std::string bytes;
  uint64_t packets = 0;
  bool more = true;
  while (more) {
    // A CodedInputStream reads at most 2 GiB; a fresh one per batch of
    // packets lifts that limit (it hands unread bytes back on destruction).
    google::protobuf::io::CodedInputStream input(&file);
    for (int i = 0; i < 100000; ++i) {
      const uint32_t tag = input.ReadTag();
      if (tag == 0) {  // end of file
        more = false;
        break;
      }
      uint32_t length = 0;
      if (tag != ((pp::Trace::kPacketFieldNumber << 3) | 2) || !input.ReadVarint32(&length) ||
          !input.ReadString(&bytes, static_cast<int>(length)) || !packet.ParseFromString(bytes)) {
        return absl::DataLossError(absl::StrCat(
            path, ": not a Perfetto trace, or damaged, at packet ", packets + 1));
      }
      ++packets;
      checker.Add(packet);
    }
  }
  return checker.Finish();
}

}  // namespace gpuos
