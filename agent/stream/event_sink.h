// Where a recording puts its events: one .gpuos file (TraceWriter) or a
// flight recorder's ring of segments that is written out as a trace on
// demand (FlightRecorder).  The recording loop needs no more than this.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual absl::Status WriteHeader(const v1::TraceHeader& header) = 0;
  virtual absl::Status Append(const v1::Event& event) = 0;
  virtual absl::Status Flush() = 0;
  // The end of the recording: the trailer goes out and the file is closed.
  virtual absl::Status WriteTrailer(const v1::TraceTrailer& trailer) = 0;
  virtual absl::Status Close() = 0;
  // An event the caller will not hand over after a failed write.
  virtual void CountLost(const v1::Event& event) = 0;
  // The first failed write and every event lost since; null when none failed.
  virtual const v1::TraceWriteFailure* failure() const = 0;
  // Events accepted so far (a flight recorder: the whole recording's).
  virtual uint64_t events_written() const = 0;
  // The file was removed while recording (nothing of the trace remains);
  // a flight recorder's segments are its own to remove.
  virtual bool Removed() const { return false; }
};

}  // namespace gpuos
