// Writes the exported timeline as a Perfetto protobuf trace (.pftrace), the
// format ui.perfetto.dev and trace_processor load: a stream of TracePackets,
// track descriptors before any event on them, slices as TYPE_SLICE_BEGIN/END
// TrackEvents, flows as flow_ids/terminating_flow_ids.
//
// Two packet sequences: 1 carries descriptors and events with event names,
// categories and debug annotation names interned (each sent once, in the
// first packet that uses it); 2 carries counter values, which trail the
// events by up to one bucket (see timeline/counter_buckets.h) and so would
// break the time order of sequence 1.  The first packet of each sequence
// clears incremental state; packets that refer to interned data say so.
// Timestamps are CLOCK_MONOTONIC ns, written in the default trace clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "export/timeline/timeline_sink.h"
#include "export/perfetto/perfetto_wire.h"

namespace gpuos {

class PerfettoTraceWriter : public TimelineSink {
 public:
  static constexpr uint32_t kEventSequence = 1;
  static constexpr uint32_t kCounterSequence = 2;

  // Creates (truncates) `path`.
  static absl::StatusOr<std::unique_ptr<PerfettoTraceWriter>> Create(const std::string& path);
  ~PerfettoTraceWriter() override;

  void DescribeTrack(uint64_t ts, const Track& track) override;
  void BeginSlice(uint64_t ts, const Track& track, const SliceEvent& event) override;
  void EndSlice(uint64_t ts, const Track& track) override;
  void Instant(uint64_t ts, const Track& track, const SliceEvent& event) override;
  void Counter(uint64_t ts, const Track& track, double value) override;
  absl::Status Finish() override;

  uint64_t packets() const { return packets_; }
  uint64_t bytes() const { return bytes_; }

 private:
  PerfettoTraceWriter(int fd, std::string path);
  void BeginPacket(uint64_t ts, uint32_t sequence, bool needs_state);
  void EndPacket();
  void WriteEvent(uint64_t ts, const Track& track, int type, const SliceEvent& event);
  uint64_t ArgNameIid(const char* key, bool* is_new);
  void Flush();

  int fd_;
  std::string path_;
  WireBuffer out_;
  size_t packet_at_ = 0;
  absl::Status status_;
  bool sequence_started_[3] = {false, false, false};
  // Interning state of the event sequence.
  std::vector<bool> name_sent_;  // by StringTable id; iid = id + 1
  bool category_sent_[kSliceCategoryCount] = {};
  absl::flat_hash_map<std::string_view, uint64_t> arg_names_;
  struct ArgNameSlot {
    const char* key = nullptr;
    uint64_t iid = 0;
  };
  static constexpr size_t kArgNameCacheSize = 251;
  ArgNameSlot arg_name_cache_[kArgNameCacheSize];
  std::vector<std::pair<const char*, uint64_t>> new_arg_names_;
  std::vector<uint64_t> arg_iids_;  // of the event being written
  uint64_t packets_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace gpuos
