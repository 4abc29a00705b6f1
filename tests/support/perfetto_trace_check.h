// Checks a Perfetto trace against the rules trace_processor relies on, for
// the exporter's tests and benchmark (Debian ships no trace_processor):
//   - every packet names its sequence; the first packet of a sequence clears
//     incremental state, and timestamps never decrease within a sequence;
//   - every track is described (TrackDescriptor) before an event uses it,
//     parents before children; process and thread descriptors carry pid,
//     tid and names;
//   - on each track, timestamps never decrease and SLICE_BEGIN/END balance
//     (nesting follows: an END closes the innermost open slice);
//   - counter values only on counter tracks, slices never on them;
//   - every interned id (event names, categories, annotation names) resolves
//     on its sequence, in a packet flagged SEQ_NEEDS_INCREMENTAL_STATE, and
//     no id is redefined with another value;
//   - every flow id starts once and terminates once, not earlier.
// Reads the file one packet at a time, so it also checks very large traces.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "perfetto_trace.pb.h"

namespace gpuos {

struct PerfettoTraceCheck {
  uint64_t packets = 0;
  uint64_t process_tracks = 0;
  uint64_t thread_tracks = 0;
  uint64_t counter_tracks = 0;
  uint64_t other_tracks = 0;
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t counter_values = 0;
  uint64_t flows = 0;  // flow ids with both ends
  // Slices and instants by resolved name.
  std::map<std::string, uint64_t> events_by_name;
  // Counter tracks by name, with how many values each got.
  std::map<std::string, uint64_t> counter_values_by_track;
  uint64_t violation_count = 0;
  std::vector<std::string> violations;  // the first few, for messages
  bool ok() const { return violation_count == 0; }
};

class PerfettoTraceChecker {
 public:
  void Add(const perfetto::protos::TracePacket& packet);
  PerfettoTraceCheck Finish();

 private:
  struct TrackState {
    bool counter = false;
    std::string name;
    uint64_t last_ts = 0;
    uint32_t depth = 0;
  };
  struct SequenceState {
    bool cleared = false;
    uint64_t last_ts = 0;
    absl::flat_hash_map<uint64_t, std::string> names;
    absl::flat_hash_map<uint64_t, std::string> categories;
    absl::flat_hash_map<uint64_t, std::string> arg_names;
  };
  struct FlowState {
    uint32_t starts = 0;
    uint32_t ends = 0;
    uint64_t start_ts = 0;
    uint64_t end_ts = 0;
  };
  void Violation(std::string message);
  void AddDescriptor(uint64_t ts, const perfetto::protos::TrackDescriptor& descriptor);
  void AddEvent(uint64_t ts, bool needs_state, SequenceState& sequence,
                const perfetto::protos::TrackEvent& event);

  PerfettoTraceCheck check_;
  absl::flat_hash_map<uint64_t, TrackState> tracks_;
  absl::flat_hash_map<uint32_t, SequenceState> sequences_;
  absl::flat_hash_map<uint64_t, FlowState> flows_;
};

// Streams `path` (a perfetto.protos.Trace) through a PerfettoTraceChecker.
// Fails only when the file cannot be read or does not parse.
absl::StatusOr<PerfettoTraceCheck> CheckPerfettoTraceFile(const std::string& path);

}  // namespace gpuos
