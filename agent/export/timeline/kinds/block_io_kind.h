// Block I/O requests on the timeline (the table: timeline/record_kinds.h):
// one slice per request, from its issue to its completion, on a track per
// block device under the process of the thread that issued it ("disk vda",
// or "disk 254:0" when the device's name is not known), so that a process's
// waits for disk sit next to its threads.  The issuing thread is an arg.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"

namespace gpuos {

// "disk vda", or "disk MAJOR:MINOR" from the dev_t (major << 20 | minor).
std::string BlockDeviceTrackName(uint32_t dev, const std::string& dev_name);

struct BlockIoKind {
  static constexpr RecordKind kKind = RecordKind::kBlockIo;
  static constexpr v1::Event::PayloadCase kSource = v1::Event::kBlockIo;
  static constexpr Shape kShape = Shape::kSlice;
  static constexpr SliceCategory kCategory = SliceCategory::kOs;
  // By BlockIoOperation.
  static constexpr const char* kNames[] = {"disk I/O", "disk read", "disk write", "disk discard", "disk flush"};
  struct Payload {
    uint64_t sector;
    uint32_t bytes;
    uint32_t rwbs;  // StringTable id or kNoString
    int32_t error;
    uint32_t issuing_tid;  // 0: not known
  };
  static absl::Status Map(const v1::Event& event, MapContext& context);
  static void Describe(const Payload& p, const TimelineRecord& record, ArgList& args);
};

// What a request does, from its rwbs ("R", "WS", "FWS", "D", "F"...): an
// index into BlockIoKind::kNames.
uint32_t BlockIoOperation(const std::string& rwbs);

}  // namespace gpuos
