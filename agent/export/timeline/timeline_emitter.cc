// TimelineEmitter: see timeline/timeline_emitter.h.
#include "export/timeline/timeline_emitter.h"

#include <algorithm>
#include <utility>

namespace gpuos {

TimelineEmitter::TimelineEmitter(TrackTable* tracks, FlowTable* flows, RecordDescriber* describer,
                                 uint64_t counter_bucket_ns, std::vector<TimelineSink*> sinks)
    : tracks_(tracks),
      flows_(flows),
      describer_(describer),
      sinks_(std::move(sinks)),
      counters_(counter_bucket_ns) {
  emit_counter_ = [this](uint64_t ts, uint32_t track, double value) {
    EmitCounter(ts, track, value);
  };
  const double bucket_s = static_cast<double>(counters_.bucket_ns()) / 1e9;
  for (uint32_t i = 0; i < tracks_->size(); ++i) {
    const Track& track = tracks_->at(i);
    if (track.kind != TrackKind::kCounter) continue;
    // Busy time is accumulated in ns; the rates in events.
    counters_.DefineTrack(i, track.counter == CounterKind::kGpuBusyPercent
                                 ? 100.0 / static_cast<double>(counters_.bucket_ns())
                                 : 1.0 / bucket_s);
  }
}

void TimelineEmitter::Describe(uint64_t ts, uint32_t track) {
  if (track >= stacks_.size()) stacks_.resize(track + 1);
  for (TimelineSink* sink : sinks_) sink->DescribeTrack(ts, tracks_->at(track));
}

void TimelineEmitter::Start(uint64_t ts) {
  started_ = true;
  // Descriptors first, processes before their threads and children (the
  // table creates a parent before its children), stamped no later than the
  // first counter value, which is reported at the start of its bucket.
  const uint64_t at = ts - ts % counters_.bucket_ns();
  for (uint32_t i = 0; i < tracks_->size(); ++i) Describe(at, i);
}

void TimelineEmitter::EmitCounter(uint64_t ts, uint32_t track, double value) {
  ++stats_.counter_values;
  for (TimelineSink* sink : sinks_) sink->Counter(ts, tracks_->at(track), value);
}

void TimelineEmitter::EndSlicesUpTo(uint64_t ts) {
  while (!open_.empty() && open_.top().end <= ts) {
    const OpenSlice slice = open_.top();
    open_.pop();
    // The heap's order and each track's stack agree: the innermost open
    // slice of a track always ends first.
    stacks_[slice.track].pop_back();
    for (TimelineSink* sink : sinks_) sink->EndSlice(slice.end, tracks_->at(slice.track));
  }
}

uint32_t TimelineEmitter::PickLane(uint64_t ts, uint32_t base, uint64_t end) {
  auto fits = [&](uint32_t track) {
    const std::vector<uint64_t>& stack = stacks_[track];
    return stack.empty() || stack.back() >= end;
  };
  if (fits(base)) return base;
  uint32_t& lanes = lane_counts_[base];
  for (uint32_t n = 1; n <= lanes; ++n) {
    const uint32_t lane = tracks_->Lane(base, n);
    if (fits(lane)) return lane;
  }
  ++lanes;
  const uint32_t lane = tracks_->Lane(base, lanes);
  ++stats_.overflow_lanes;
  Describe(ts, lane);
  return lane;
}

void TimelineEmitter::AddCounters(const TimelineRecord& record, const RecordKindInfo& kind,
                                  const Track& track) {
  if (kind.gpu_busy) {
    // Records come in start order, so the covered part of a device's
    // time only grows: count what lies beyond it.
    const uint64_t end = record.ts + record.dur;
    uint64_t& busy_until = gpu_busy_until_[track.device];
    const uint64_t from = std::max(record.ts, busy_until);
    if (end > from) {
      counters_.Add(tracks_->Counter(CounterKind::kGpuBusyPercent, track.device), from, end,
                    static_cast<double>(end - from));
      busy_until = end;
    }
  }
  if (kind.count != nullptr) {
    const CounterAdd add = kind.count(record);
    counters_.Add(add.track, add.start, add.end, add.amount);
  }
}

void TimelineEmitter::AddFlows(const TimelineRecord& record, const RecordKindInfo& kind) {
  flow_starts_.clear();
  flow_ends_.clear();
  if (kind.flow == nullptr) return;
  const FlowEnd flow = kind.flow(record);
  switch (flow.role) {
    case FlowEnd::Role::kNone:
      break;
    case FlowEnd::Role::kCudaCall:
      flows_->OnApiCall(record.pid, static_cast<uint32_t>(flow.id), &flow_starts_, &flow_ends_);
      break;
    case FlowEnd::Role::kCudaWork:
      flows_->OnGpuWork(record.pid, static_cast<uint32_t>(flow.id), &flow_starts_, &flow_ends_);
      break;
    case FlowEnd::Role::kStart:
      flow_starts_.push_back(flow.id);
      break;
    case FlowEnd::Role::kEnd:
      flow_ends_.push_back(flow.id);
      break;
  }
}

void TimelineEmitter::Add(const TimelineRecord& record) {
  if (!started_) Start(record.ts);
  counters_.AdvanceTo(record.ts, emit_counter_);
  EndSlicesUpTo(record.ts);

  const RecordKindInfo& kind = KindInfo(record.kind);
  const Track& base = tracks_->at(record.track);
  AddCounters(record, kind, base);
  if (kind.shape == Shape::kCounterOnly) return;

  AddFlows(record, kind);
  describer_->Describe(record, &event_);
  event_.flow_ids = absl::MakeConstSpan(flow_starts_);
  event_.terminating_flow_ids = absl::MakeConstSpan(flow_ends_);

  if (kind.shape == Shape::kInstant) {
    ++stats_.instants;
    for (TimelineSink* sink : sinks_) sink->Instant(record.ts, base, event_);
    return;
  }
  const uint64_t end = record.ts + record.dur;
  const uint32_t lane = PickLane(record.ts, record.track, end);
  ++stats_.slices;
  for (TimelineSink* sink : sinks_) sink->BeginSlice(record.ts, tracks_->at(lane), event_);
  stacks_[lane].push_back(end);
  open_.push({end, push_seq_++, lane});
}

void TimelineEmitter::Finish() {
  if (!started_) Start(0);
  EndSlicesUpTo(UINT64_MAX);
  counters_.Finish(emit_counter_);
}

}  // namespace gpuos
