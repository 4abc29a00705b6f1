// What each .gpuos event becomes on the exported timeline, driven by the
// table of record kinds (timeline/record_kinds.h): EventMapper (pass 1)
// names processes and threads and hands each event to its kind's mapping,
// which puts records on their tracks; RecordDescriber (pass 2) turns a
// record back into a name, a category and debug annotations through its
// kind's Describe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "export/timeline/arg_list.h"
#include "export/timeline/export_options.h"
#include "export/timeline/flow_table.h"
#include "export/timeline/map_context.h"
#include "export/timeline/record_kinds.h"
#include "export/timeline/record_sorter.h"
#include "export/timeline/string_table.h"
#include "export/timeline/timeline_record.h"
#include "export/timeline/timeline_sink.h"
#include "export/timeline/track_table.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class EventMapper {
 public:
  EventMapper(const v1::TraceHeader& header, TrackTable* tracks, StringTable* strings,
              FlowTable* flows, RecordSorter* sorter);

  absl::Status Add(const v1::Event& event);
  absl::Status AddStep(const StepSpan& step);
  // An attached recording's window, [start_ns, end_ns), on its own
  // trace-wide track: nothing outside it was recorded.
  absl::Status AddAttachWindow(uint64_t start_ns, uint64_t end_ns);
  // A capture window of process `pid` (--capture): CUDA detail inside.
  absl::Status AddCaptureWindow(uint32_t pid, uint64_t start_ns, uint64_t end_ns, const std::string& reason,
                                bool cupti_subscribed);

  uint64_t events() const { return events_; }
  uint64_t records() const { return context_.records(); }

 private:
  // Events that name processes and threads or say where they belong, and
  // draw nothing themselves; false for any other event.
  bool AddNames(const v1::Event& event, uint32_t tid);

  MapContext context_;
  uint64_t events_ = 0;
  // By v1::Event::PayloadCase: the mapping of the kind drawn from it.
  std::vector<absl::Status (*)(const v1::Event&, MapContext&)> mappings_;
};

class RecordDescriber {
 public:
  RecordDescriber(const v1::TraceHeader& header, const StringTable& strings);
  // Sets event->name, name_id, category and args (valid until the next call);
  // leaves the flow ids alone.
  void Describe(const TimelineRecord& record, SliceEvent* event);

 private:
  const StringTable& strings_;
  ArgList args_;
};

}  // namespace gpuos
