// Opens where a recording's events go: the output file itself, or, with
// --flight-recorder, a ring of segments next to it that becomes the output
// file at the end (and dump files before).  Shared by the launched and the
// attached recording.
#pragma once

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"
#include "record/record_options.h"
#include "stream/event_sink.h"
#include "stream/flight_recorder.h"

namespace gpuos {

struct TraceSink {
  std::unique_ptr<EventSink> sink;
  FlightRecorder* flight = nullptr;  // set when `sink` is a flight recorder
};

// Files are given to `owner`:`group` unless owner is -1 (a failure is a
// warning on stderr).
absl::StatusOr<TraceSink> OpenTraceSink(const RecordOptions& options, uid_t owner, gid_t group);

}  // namespace gpuos
