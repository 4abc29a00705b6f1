// See trace_sink.h.
#include "record/trace_sink.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "stream/trace_writer.h"

namespace gpuos {

absl::StatusOr<TraceSink> OpenTraceSink(const RecordOptions& options, uid_t owner, gid_t group) {
  TraceSink out;
  if (options.flight_recorder()) {
    FlightRecorder::Options flight_options;
    flight_options.output_path = options.output_path;
    flight_options.max_bytes = options.flight_bytes;
    flight_options.max_span_ns = options.flight_span_ns;
    flight_options.owner = owner;
    flight_options.group = group;
    auto flight = FlightRecorder::Create(flight_options);
    if (!flight.ok()) return flight.status();
    out.flight = flight->get();
    out.sink = std::move(*flight);
    return out;
  }
  TraceWriter::Options writer_options;
  writer_options.max_file_bytes = options.max_file_bytes;
  auto writer = TraceWriter::Create(options.output_path, writer_options);
  if (!writer.ok()) return writer.status();
  if (owner != static_cast<uid_t>(-1) && fchown((*writer)->fd(), owner, group) != 0) {
    fprintf(stderr, "gpuos-trace: warning: cannot give %s to uid %u: %s\n", options.output_path.c_str(), owner,
            strerror(errno));
  }
  out.sink = std::move(*writer);
  return out;
}

}  // namespace gpuos
