// PerfettoTraceWriter: see perfetto/perfetto_trace_writer.h.
#include "export/perfetto/perfetto_trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "perfetto_trace.pb.h"

namespace gpuos {
namespace {

namespace pp = ::perfetto::protos;

constexpr size_t kFlushBytes = 1 << 20;

// The value of a debug annotation, in the field its type calls for.
void WriteDebugAnnotationValue(const DebugArg& arg, WireBuffer& out) {
  switch (arg.type) {
    case DebugArg::Type::kInt:
      out.IntField(pp::DebugAnnotation::kIntValueFieldNumber, arg.int_value);
      break;
    case DebugArg::Type::kUint:
      out.UintField(pp::DebugAnnotation::kUintValueFieldNumber, arg.uint_value);
      break;
    case DebugArg::Type::kPointer:
      out.UintField(pp::DebugAnnotation::kPointerValueFieldNumber, arg.uint_value);
      break;
    case DebugArg::Type::kDouble:
      out.DoubleField(pp::DebugAnnotation::kDoubleValueFieldNumber, arg.double_value);
      break;
    case DebugArg::Type::kBool:
      out.BoolField(pp::DebugAnnotation::kBoolValueFieldNumber, arg.bool_value);
      break;
    case DebugArg::Type::kString:
      out.StringField(pp::DebugAnnotation::kStringValueFieldNumber, arg.string_value);
      break;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PerfettoTraceWriter>> PerfettoTraceWriter::Create(
    const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  return std::unique_ptr<PerfettoTraceWriter>(new PerfettoTraceWriter(fd, path));
}

PerfettoTraceWriter::PerfettoTraceWriter(int fd, std::string path)
    : fd_(fd), path_(std::move(path)) {}

PerfettoTraceWriter::~PerfettoTraceWriter() {
  if (fd_ >= 0) close(fd_);
}

void PerfettoTraceWriter::BeginPacket(uint64_t ts, uint32_t sequence, bool needs_state) {
  packet_at_ = out_.BeginNested(pp::Trace::kPacketFieldNumber);
  out_.UintField(pp::TracePacket::kTimestampFieldNumber, ts);
  out_.UintField(pp::TracePacket::kTrustedPacketSequenceIdFieldNumber, sequence);
  uint32_t flags = 0;
  if (!sequence_started_[sequence]) {
    sequence_started_[sequence] = true;
    flags |= pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED;
    out_.BoolField(pp::TracePacket::kFirstPacketOnSequenceFieldNumber, true);
  }
  if (needs_state) flags |= pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE;
  if (flags != 0) out_.UintField(pp::TracePacket::kSequenceFlagsFieldNumber, flags);
}

void PerfettoTraceWriter::EndPacket() {
  out_.EndNested(packet_at_);
  ++packets_;
  if (out_.size() >= kFlushBytes) Flush();
}

void PerfettoTraceWriter::Flush() {
  const char* data = out_.data();
  const size_t size = out_.size();
  size_t done = 0;
  while (status_.ok() && done < size) {
    ssize_t n = write(fd_, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(errno)));
      break;
    }
    done += static_cast<size_t>(n);
  }
  bytes_ += done;
  out_.clear();
}

void PerfettoTraceWriter::DescribeTrack(uint64_t ts, const Track& track) {
  BeginPacket(ts, kEventSequence, false);
  const size_t descriptor = out_.BeginNested(pp::TracePacket::kTrackDescriptorFieldNumber);
  out_.UintField(pp::TrackDescriptor::kUuidFieldNumber, track.uuid);
  if (track.parent_uuid != 0) {
    out_.UintField(pp::TrackDescriptor::kParentUuidFieldNumber, track.parent_uuid);
  }
  out_.StringField(pp::TrackDescriptor::kNameFieldNumber, track.name);
  if (track.kind == TrackKind::kProcess && track.lane == 0) {
    const size_t process = out_.BeginNested(pp::TrackDescriptor::kProcessFieldNumber);
    out_.IntField(pp::ProcessDescriptor::kPidFieldNumber, static_cast<int32_t>(track.pid));
    for (const std::string& arg : track.cmdline) {
      out_.StringField(pp::ProcessDescriptor::kCmdlineFieldNumber, arg);
    }
    out_.StringField(pp::ProcessDescriptor::kProcessNameFieldNumber, track.name);
    out_.EndNested(process);
  } else if (track.kind == TrackKind::kThread && track.lane == 0) {
    const size_t thread = out_.BeginNested(pp::TrackDescriptor::kThreadFieldNumber);
    out_.IntField(pp::ThreadDescriptor::kPidFieldNumber, static_cast<int32_t>(track.pid));
    out_.IntField(pp::ThreadDescriptor::kTidFieldNumber, static_cast<int32_t>(track.tid));
    out_.StringField(pp::ThreadDescriptor::kThreadNameFieldNumber, track.name);
    out_.EndNested(thread);
  } else if (track.kind == TrackKind::kCounter) {
    // An empty CounterDescriptor is what makes this a counter track; the
    // unit is in the name ("busy %", "/s").
    out_.EndNested(out_.BeginNested(pp::TrackDescriptor::kCounterFieldNumber));
  }
  out_.EndNested(descriptor);
  EndPacket();
}

uint64_t PerfettoTraceWriter::ArgNameIid(const char* key, bool* is_new) {
  // Keys are string literals: a small cache keyed by address answers
  // almost every lookup; the text is hashed only on a cache miss.
  ArgNameSlot& slot = arg_name_cache_[(reinterpret_cast<uintptr_t>(key) >> 3) % kArgNameCacheSize];
  if (slot.key == key) {
    *is_new = false;
    return slot.iid;
  }
  auto [it, inserted] = arg_names_.try_emplace(key, arg_names_.size() + 1);
  *is_new = inserted;
  slot.key = key;
  slot.iid = it->second;
  return it->second;
}

void PerfettoTraceWriter::WriteEvent(uint64_t ts, const Track& track, int type,
                                     const SliceEvent& event) {
  BeginPacket(ts, kEventSequence, true);

  // New interned entries go in the packet that first uses them.
  if (event.name_id >= name_sent_.size()) name_sent_.resize(event.name_id + 1024, false);
  const bool new_name = !name_sent_[event.name_id];
  const int category = static_cast<int>(event.category);
  const bool new_category = !category_sent_[category];
  new_arg_names_.clear();
  arg_iids_.clear();
  for (const DebugArg& arg : event.args) {
    bool is_new;
    arg_iids_.push_back(ArgNameIid(arg.key, &is_new));
    if (is_new) new_arg_names_.emplace_back(arg.key, arg_iids_.back());
  }
  if (new_name || new_category || !new_arg_names_.empty()) {
    const size_t interned = out_.BeginNested(pp::TracePacket::kInternedDataFieldNumber);
    if (new_category) {
      const size_t entry = out_.BeginNested(pp::InternedData::kEventCategoriesFieldNumber);
      out_.UintField(pp::EventCategory::kIidFieldNumber, category + 1);
      out_.StringField(pp::EventCategory::kNameFieldNumber,
                       SliceCategoryName(event.category));
      out_.EndNested(entry);
      category_sent_[category] = true;
    }
    if (new_name) {
      const size_t entry = out_.BeginNested(pp::InternedData::kEventNamesFieldNumber);
      out_.UintField(pp::EventName::kIidFieldNumber, event.name_id + 1);
      out_.StringField(pp::EventName::kNameFieldNumber, event.name);
      out_.EndNested(entry);
      name_sent_[event.name_id] = true;
    }
    for (const auto& [key, iid] : new_arg_names_) {
      const size_t entry = out_.BeginNested(pp::InternedData::kDebugAnnotationNamesFieldNumber);
      out_.UintField(pp::DebugAnnotationName::kIidFieldNumber, iid);
      out_.StringField(pp::DebugAnnotationName::kNameFieldNumber, key);
      out_.EndNested(entry);
    }
    out_.EndNested(interned);
  }

  const size_t te = out_.BeginNested(pp::TracePacket::kTrackEventFieldNumber);
  out_.UintField(pp::TrackEvent::kTypeFieldNumber, static_cast<uint64_t>(type));
  out_.UintField(pp::TrackEvent::kTrackUuidFieldNumber, track.uuid);
  out_.UintField(pp::TrackEvent::kCategoryIidsFieldNumber, category + 1);
  out_.UintField(pp::TrackEvent::kNameIidFieldNumber, event.name_id + 1);
  // Upstream declares these unpacked: one tag per id.
  for (uint64_t id : event.flow_ids) out_.Fixed64Field(pp::TrackEvent::kFlowIdsFieldNumber, id);
  for (uint64_t id : event.terminating_flow_ids) {
    out_.Fixed64Field(pp::TrackEvent::kTerminatingFlowIdsFieldNumber, id);
  }
  for (size_t i = 0; i < event.args.size(); ++i) {
    const size_t annotation = out_.BeginNested(pp::TrackEvent::kDebugAnnotationsFieldNumber);
    out_.UintField(pp::DebugAnnotation::kNameIidFieldNumber, arg_iids_[i]);
    WriteDebugAnnotationValue(event.args[i], out_);
    out_.EndNested(annotation);
  }
  out_.EndNested(te);
  EndPacket();
}

void PerfettoTraceWriter::BeginSlice(uint64_t ts, const Track& track, const SliceEvent& event) {
  WriteEvent(ts, track, pp::TrackEvent::TYPE_SLICE_BEGIN, event);
}

void PerfettoTraceWriter::Instant(uint64_t ts, const Track& track, const SliceEvent& event) {
  WriteEvent(ts, track, pp::TrackEvent::TYPE_INSTANT, event);
}

void PerfettoTraceWriter::EndSlice(uint64_t ts, const Track& track) {
  BeginPacket(ts, kEventSequence, false);
  const size_t te = out_.BeginNested(pp::TracePacket::kTrackEventFieldNumber);
  out_.UintField(pp::TrackEvent::kTypeFieldNumber, pp::TrackEvent::TYPE_SLICE_END);
  out_.UintField(pp::TrackEvent::kTrackUuidFieldNumber, track.uuid);
  out_.EndNested(te);
  EndPacket();
}

void PerfettoTraceWriter::Counter(uint64_t ts, const Track& track, double value) {
  BeginPacket(ts, kCounterSequence, false);
  const size_t te = out_.BeginNested(pp::TracePacket::kTrackEventFieldNumber);
  out_.UintField(pp::TrackEvent::kTypeFieldNumber, pp::TrackEvent::TYPE_COUNTER);
  out_.UintField(pp::TrackEvent::kTrackUuidFieldNumber, track.uuid);
  out_.DoubleField(pp::TrackEvent::kDoubleCounterValueFieldNumber, value);
  out_.EndNested(te);
  EndPacket();
}

absl::Status PerfettoTraceWriter::Finish() {
  Flush();
  if (fd_ >= 0) {
    if (close(fd_) != 0 && status_.ok()) {
      status_ = absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(errno)));
    }
    fd_ = -1;
  }
  return status_;
}

}  // namespace gpuos
