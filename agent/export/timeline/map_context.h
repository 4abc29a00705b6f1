// What a kind's mapping (pass 1, timeline/record_kinds.h) works with: the
// tables it fills (tracks, names, CUDA flow ends), the trace header, the
// processes seen so far, and Emit<Kind>, which makes a record of that kind
// carry that kind's payload and hands it to the sorter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "export/timeline/flow_table.h"
#include "export/timeline/record_kinds.h"
#include "export/timeline/record_sorter.h"
#include "export/timeline/string_table.h"
#include "export/timeline/timeline_record.h"
#include "export/timeline/track_table.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// The StringTable id of "no string" (an optional name left out).
inline constexpr uint32_t kNoString = std::numeric_limits<uint32_t>::max();

class MapContext {
 public:
  MapContext(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
             FlowTable* flows, RecordSorter* sorter);

  const v1::TraceHeader& header() const { return header_; }
  TrackTable& tracks() { return *tracks_; }
  StringTable& strings() { return *strings_; }
  FlowTable& flows() { return *flows_; }
  // Whether a process has had events (a waker outside them is not drawn).
  bool Seen(uint32_t pid) const { return pids_.contains(pid); }
  void MarkSeen(uint32_t pid) { pids_.insert(pid); }

  // The id of `kind`'s fixed name number `index` (its kNames), the first
  // one when out of range.
  uint32_t FixedName(RecordKind kind, uint32_t index) const {
    const std::vector<uint32_t>& names = fixed_names_[static_cast<size_t>(kind)];
    return names[index < names.size() ? index : 0];
  }
  // `text`'s id, or `fallback` (a fixed name) when it is empty.
  uint32_t NameOr(const std::string& text, uint32_t fallback) {
    return text.empty() ? fallback : strings_->Intern(text);
  }
  // `text`'s id, or kNoString when it is empty.
  uint32_t OptionalName(const std::string& text) {
    return text.empty() ? kNoString : strings_->Intern(text);
  }

  // A record at `event`'s time and process, lasting `dur` (clamped so that
  // a corrupt duration cannot wrap the end time around).
  static TimelineRecord At(const v1::Event& event, uint64_t dur) { return Span(event.ts_ns(), dur, event.pid()); }
  static TimelineRecord Span(uint64_t ts, uint64_t dur, uint32_t pid) {
    TimelineRecord record{};
    record.ts = ts;
    record.dur = std::min(dur, std::numeric_limits<uint64_t>::max() - ts);
    record.pid = pid;
    return record;
  }

  template <class Kind>
  absl::Status Emit(TimelineRecord record, uint32_t track, uint32_t name,
                    const typename Kind::Payload& payload) {
    record.kind = Kind::kKind;
    record.track = track;
    record.name = name;
    SetPayload(record, payload);
    record.ordinal = ordinal_++;
    return sorter_->Add(record);
  }

  uint64_t records() const { return ordinal_; }

 private:
  const v1::TraceHeader& header_;
  TrackTable* tracks_;
  StringTable* strings_;
  FlowTable* flows_;
  RecordSorter* sorter_;
  uint64_t ordinal_ = 0;
  absl::flat_hash_set<uint32_t> pids_;
  std::vector<std::vector<uint32_t>> fixed_names_;  // by RecordKind
};

}  // namespace gpuos
