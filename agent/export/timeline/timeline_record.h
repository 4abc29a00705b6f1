// The unit the exporter sorts: one timeline item (a slice, an instant or a
// counter contribution) cut down from a .gpuos event to a fixed-size POD, so
// that millions of them can be sorted in memory, spilled to temporary files
// and merged back without any allocation per item.  What the payload holds
// is each kind's own typed struct (timeline/record_kinds.h), written and read
// only through SetPayload/GetPayload, which check that it fits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gpuos {

// Enumerated in timeline/record_kinds.h, one value per kind of the table.
enum class RecordKind : uint8_t;

inline constexpr size_t kRecordPayloadWords = 6;

struct TimelineRecord {
  uint64_t ts;       // start, CLOCK_MONOTONIC ns
  uint64_t dur;      // 0 for instants
  uint64_t ordinal;  // position in the input: makes the order total and stable
  uint32_t track;    // TrackTable index (before any overlap lane is chosen)
  uint32_t name;     // StringTable id
  uint32_t pid;
  RecordKind kind;
  uint8_t unused[3];
  // The kind's payload struct, as bytes; zero past its end.
  uint64_t payload[kRecordPayloadWords];
};
static_assert(std::is_trivially_copyable<TimelineRecord>::value, "records are moved as bytes");
static_assert(sizeof(TimelineRecord) == 88, "keep records compact: millions are sorted at once");

// A kind's payload struct: plain bytes without padding (so that a record's
// bytes are all defined and spill compactly), no larger than the payload.
template <class Payload>
constexpr bool IsRecordPayload() {
  return std::is_trivially_copyable<Payload>::value &&
         (std::is_empty<Payload>::value || std::has_unique_object_representations<Payload>::value) &&
         sizeof(Payload) <= sizeof(TimelineRecord::payload);
}

template <class Payload>
void SetPayload(TimelineRecord& record, const Payload& payload) {
  static_assert(IsRecordPayload<Payload>(), "a payload is padding-free and fits 48 bytes");
  std::memset(record.payload, 0, sizeof(record.payload));
  if constexpr (!std::is_empty<Payload>::value) std::memcpy(record.payload, &payload, sizeof(Payload));
}

template <class Payload>
Payload GetPayload(const TimelineRecord& record) {
  static_assert(IsRecordPayload<Payload>(), "a payload is padding-free and fits 48 bytes");
  Payload payload{};
  if constexpr (!std::is_empty<Payload>::value) std::memcpy(&payload, record.payload, sizeof(Payload));
  return payload;
}

// Start time first; at equal starts the longer slice first, so that on one
// track a parent begins before the child that starts with it.
inline bool RecordBefore(const TimelineRecord& x, const TimelineRecord& y) {
  if (x.ts != y.ts) return x.ts < y.ts;
  if (x.dur != y.dur) return x.dur > y.dur;
  return x.ordinal < y.ordinal;
}

// RecordBefore as a type, so that std::sort and heaps inline it.
struct RecordOrder {
  bool operator()(const TimelineRecord& x, const TimelineRecord& y) const {
    return RecordBefore(x, y);
  }
};

}  // namespace gpuos
