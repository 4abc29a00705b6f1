// What the exporter's pass 2 hands to an output format: tracks, then slices,
// instants, counter values and flow ends, already in an order every format
// can write as it goes.  Guarantees a sink may rely on:
//   - DescribeTrack(t) comes before any event on t;
//   - on each track, BeginSlice/EndSlice pairs balance and nest, and their
//     timestamps never decrease;
//   - slices, instants and descriptors come in non-decreasing time order
//     overall; counter values come in non-decreasing time order among
//     themselves (each is known only when its bucket closes, so they trail
//     the slices by up to one bucket);
//   - every flow id is started on exactly one event and terminated on
//     exactly one later-or-equal event.
// The Perfetto writer and the Chrome JSON writer implement it.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "export/timeline/track_table.h"

namespace gpuos {

enum class SliceCategory : uint8_t { kCuda, kGpu, kNvtx, kOs, kSched, kStep, kProcess };
inline constexpr int kSliceCategoryCount = 7;
const char* SliceCategoryName(SliceCategory category);

// One debug annotation.  `key` is a string literal: sinks may intern by it.
struct DebugArg {
  enum class Type : uint8_t { kInt, kUint, kDouble, kBool, kString, kPointer };
  const char* key = "";
  Type type = Type::kInt;
  int64_t int_value = 0;
  uint64_t uint_value = 0;  // kUint, kPointer
  double double_value = 0;
  bool bool_value = false;
  std::string_view string_value;
};

struct SliceEvent {
  uint32_t name_id = 0;  // StringTable id of `name`
  std::string_view name;
  SliceCategory category = SliceCategory::kOs;
  absl::Span<const DebugArg> args;
  absl::Span<const uint64_t> flow_ids;              // flows starting here
  absl::Span<const uint64_t> terminating_flow_ids;  // flows ending here
};

class TimelineSink {
 public:
  virtual ~TimelineSink() = default;
  virtual void DescribeTrack(uint64_t ts, const Track& track) = 0;
  virtual void BeginSlice(uint64_t ts, const Track& track, const SliceEvent& event) = 0;
  virtual void EndSlice(uint64_t ts, const Track& track) = 0;
  virtual void Instant(uint64_t ts, const Track& track, const SliceEvent& event) = 0;
  virtual void Counter(uint64_t ts, const Track& track, double value) = 0;
  // Writes what is buffered and closes the output; the first write error
  // seen at any point is returned here.
  virtual absl::Status Finish() = 0;
};

}  // namespace gpuos
