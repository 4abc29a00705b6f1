// Pass 2 of the export: takes TimelineRecords in time order and drives the
// output sinks, keeping the promises of timeline/timeline_sink.h:
//   - every track is described before the first event;
//   - a slice goes on the first lane of its track where it nests (a track's
//     open slices form a stack; a slice fits if it ends no later than the
//     innermost open one), else on a new overflow lane, so each track's
//     slices always balance and nest whatever the input holds;
//   - a slice's END is written when time moves past its end, innermost
//     first, before anything that starts later;
//   - what a record draws (slice, instant, nothing), its flow ends and its
//     counter contributions come from its kind (timeline/record_kinds.h);
//     CUDA flow ids from FlowTable, counter values from CounterBuckets (GPU
//     busy time is the union of a device's kernels, copies and memsets).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "export/timeline/counter_buckets.h"
#include "export/timeline/event_mapper.h"
#include "export/timeline/flow_table.h"
#include "export/timeline/record_kinds.h"
#include "export/timeline/timeline_record.h"
#include "export/timeline/timeline_sink.h"
#include "export/timeline/track_table.h"

namespace gpuos {

class TimelineEmitter {
 public:
  struct Stats {
    uint64_t slices = 0;
    uint64_t instants = 0;
    uint64_t counter_values = 0;
    uint64_t overflow_lanes = 0;
  };

  TimelineEmitter(TrackTable* tracks, FlowTable* flows, RecordDescriber* describer,
                  uint64_t counter_bucket_ns, std::vector<TimelineSink*> sinks);

  void Add(const TimelineRecord& record);
  // Ends every open slice and reports the last counter buckets.
  void Finish();
  const Stats& stats() const { return stats_; }

 private:
  struct OpenSlice {
    uint64_t end;
    uint64_t seq;  // push order: of two equal ends, the later push is inner
    uint32_t track;
  };
  struct EndsLater {
    bool operator()(const OpenSlice& x, const OpenSlice& y) const {
      if (x.end != y.end) return x.end > y.end;
      return x.seq < y.seq;
    }
  };

  void Start(uint64_t ts);
  void Describe(uint64_t ts, uint32_t track);
  void EndSlicesUpTo(uint64_t ts);
  uint32_t PickLane(uint64_t ts, uint32_t base, uint64_t end);
  void AddCounters(const TimelineRecord& record, const RecordKindInfo& kind, const Track& track);
  // Sets flow_starts_ and flow_ends_ for `record`.
  void AddFlows(const TimelineRecord& record, const RecordKindInfo& kind);
  void EmitCounter(uint64_t ts, uint32_t track, double value);

  TrackTable* tracks_;
  FlowTable* flows_;
  RecordDescriber* describer_;
  std::vector<TimelineSink*> sinks_;
  CounterBuckets counters_;
  CounterBuckets::EmitFn emit_counter_;
  bool started_ = false;
  std::vector<std::vector<uint64_t>> stacks_;  // by track: ends of open slices
  absl::flat_hash_map<uint32_t, uint32_t> lane_counts_;  // base -> lanes beyond it
  std::priority_queue<OpenSlice, std::vector<OpenSlice>, EndsLater> open_;
  uint64_t push_seq_ = 0;
  absl::flat_hash_map<uint32_t, uint64_t> gpu_busy_until_;  // by device
  std::vector<uint64_t> flow_starts_;
  std::vector<uint64_t> flow_ends_;
  SliceEvent event_;
  Stats stats_;
};

}  // namespace gpuos
