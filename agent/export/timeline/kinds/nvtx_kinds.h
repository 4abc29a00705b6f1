// The NVTX kinds of timeline records (the table: timeline/record_kinds.h):
// push/pop ranges on their thread, start/end ranges (which may end on
// another thread) on the process's "NVTX ranges" track, marks as instants.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"

namespace gpuos {

// Maps every NVTX range: push/pop ones itself, start/end ones as
// NvtxStartEndKind records.
struct NvtxPushPopKind {
  static constexpr RecordKind kKind = RecordKind::kNvtxPushPop;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kNvtxRange;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kNvtx;
  static constexpr const char* kNames[] = {"(unnamed)"};
  struct Payload {
    uint32_t domain;  // StringTable id or kNoString
    uint32_t depth;
    uint32_t color;
    uint32_t category;
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

struct NvtxStartEndKind {
  static constexpr RecordKind kKind = RecordKind::kNvtxStartEnd;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::PAYLOAD_NOT_SET;  // NvtxPushPopKind's
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kNvtx;
  static constexpr const char* kNames[] = {"(unnamed)"};
  struct Payload {
    uint32_t domain;  // StringTable id or kNoString
    uint32_t start_tid;
    uint32_t end_tid;
    uint32_t color;
    uint32_t category;
  };
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

struct NvtxMarkKind {
  static constexpr RecordKind kKind = RecordKind::kNvtxMark;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kNvtxMark;
  static constexpr Shape kShape = Shape::kInstant;
  static constexpr SliceCategory kCategory = SliceCategory::kNvtx;
  static constexpr const char* kNames[] = {"(unnamed)"};
  struct Payload {
    uint32_t domain;  // StringTable id or kNoString
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

}  // namespace gpuos
