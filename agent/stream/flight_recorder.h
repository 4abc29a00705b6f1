// --flight-recorder: keeps only the most recent events of a recording, in a
// ring of segment files whose total stays within a size (or whose span
// covers a duration), and writes them out on demand as one complete .gpuos
// trace: header, the process/thread table as it stood when the window
// opened, the window's events, trailer.  Segments live in a directory next
// to the output (OUT.flight/seg-NNNNNN.gpuos); each is itself a small .gpuos
// file, its first events that table at its opening, so the oldest kept
// segment always names every thread of the window.  Memory holds one batch
// and the process table, whatever the number of events.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"
#include "stream/event_sink.h"
#include "stream/process_table.h"
#include "stream/trace_writer.h"

namespace gpuos {

class FlightRecorder : public EventSink {
 public:
  struct Options {
    // The trace written at the end of the recording (WriteTrailer); dumps
    // before that go to DumpPath(n).
    std::string output_path;
    // The ring's directory; empty: output_path + ".flight".
    std::string ring_dir;
    // One of the two bounds: the ring's total bytes, or the span its
    // segments must cover.
    uint64_t max_bytes = 0;
    uint64_t max_span_ns = 0;
    // The ring is this many segments (the newest one being filled): rotating
    // drops 1/segments of the window at a time.
    uint32_t segments = 8;
    // Owner for the ring and the dumps (-1: leave as created).
    uid_t owner = static_cast<uid_t>(-1);
    gid_t group = static_cast<gid_t>(-1);
  };

  struct DumpResult {
    std::string path;
    uint64_t events = 0;  // in the file, the table at the window's start included
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
  };

  // Creates the ring directory (segments left there by an earlier run are
  // removed).
  static absl::StatusOr<std::unique_ptr<FlightRecorder>> Create(Options options);
  ~FlightRecorder() override;

  // Kept for every dump; the segments get a header of their own.
  absl::Status WriteHeader(const v1::TraceHeader& header) override;
  absl::Status Append(const v1::Event& event) override;
  absl::Status Flush() override;
  // Dumps the window to output_path with `trailer`, then closes the ring
  // and removes it.
  absl::Status WriteTrailer(const v1::TraceTrailer& trailer) override;
  // Closes the ring and removes its directory.
  absl::Status Close() override;
  void CountLost(const v1::Event& event) override;
  const v1::TraceWriteFailure* failure() const override;
  uint64_t events_written() const override { return events_received_; }

  // Writes the kept window as a complete trace to `path` (through a
  // temporary file renamed into place, so a reader never sees half of it).
  // `trailer`'s events_written is set to the file's count.  `reason` goes in
  // the header's flight_window.
  absl::StatusOr<DumpResult> Dump(const std::string& path, v1::TraceTrailer trailer, const std::string& reason);
  // Where the n-th dump before the end goes: OUT.gpuos -> OUT.dump-<n>.gpuos.
  std::string DumpPath(uint32_t n) const;
  uint32_t dumps() const { return dumps_; }
  // The latest dump written (path empty: none yet).
  const DumpResult& last_dump() const { return last_dump_; }
  uint64_t events_rotated_out() const { return events_rotated_out_; }
  // The reason the end-of-recording dump gives ("end of recording",
  // "Ctrl-C"...).
  void set_end_reason(std::string reason) { end_reason_ = std::move(reason); }

  // The ring as it stands: segment files, bytes on disk, events in the
  // window (the segments' tables not counted).
  size_t segment_count() const { return segments_.size(); }
  uint64_t ring_bytes() const;
  uint64_t window_events() const;
  const std::string& ring_dir() const { return options_.ring_dir; }

 private:
  struct Segment {
    std::string path;
    uint64_t open_ns = 0;  // the latest event time when it was opened
    uint64_t table_events = 0;  // the process table at its head
    uint64_t events = 0;        // after the table
    uint64_t bytes = 0;         // on disk, once closed
  };

  explicit FlightRecorder(Options options);
  absl::Status OpenSegment();
  absl::Status RotateIfDue();
  void NoteFailure(const absl::Status& status);
  // The header of a dump of the window [start_ns, end_ns]; counts the dump.
  v1::TraceHeader WindowHeader(uint64_t start_ns, uint64_t end_ns, const std::string& reason);
  // The segments' events, appended to `out`; counts them in *events.
  absl::Status CopySegments(uint64_t start_ns, TraceWriter& out, uint64_t* events) const;

  Options options_;
  size_t batch_bytes_ = 0;
  uint64_t segment_bytes_ = 0;  // size mode: a segment's cap
  v1::TraceHeader header_;
  bool has_header_ = false;
  ProcessTable table_;
  std::deque<Segment> segments_;  // oldest first; back() is being written
  std::unique_ptr<TraceWriter> current_;
  uint64_t next_segment_ = 0;
  uint64_t events_received_ = 0;
  uint64_t events_rotated_out_ = 0;
  uint64_t latest_ns_ = 0;
  uint32_t dumps_ = 0;
  DumpResult last_dump_;
  size_t max_event_bytes_ = 256;
  std::string end_reason_ = "the end of the recording";
  // Failures of closed segments; events the caller counted as lost; the
  // two with the current segment's, as failure() returns them.
  bool failed_ = false;
  v1::TraceWriteFailure failure_;
  v1::TraceWriteFailure lost_;
  mutable v1::TraceWriteFailure merged_;
};

}  // namespace gpuos
