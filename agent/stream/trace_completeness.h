// Whether a .gpuos file holds everything its recording saw, and if not, why,
// in one sentence that report, export and dump all print first: a trace that
// lost events must never read as whole.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// Empty when the trace is complete: it has a trailer and no write failed.
// Otherwise what is missing: no trailer (the tracer was killed or its last
// writes failed), or the write failure the trailer records, with when it
// happened (seconds into the recording, from the header's start clock) and
// the events lost by kind.
std::string IncompleteReason(const v1::TraceHeader& header, bool has_trailer, const v1::TraceTrailer& trailer);

// IncompleteReason of the file at `path`, found by stepping over its frames
// without parsing the batches (cheap before a full pass).  A damaged frame
// ends the walk like the reader's end: the file then has no trailer.
// Errors: the file cannot be opened or has no valid header.
absl::StatusOr<std::string> IncompleteReasonOfFile(const std::string& path);

// Empty unless the trace is a flight recorder's dump (--flight-recorder);
// then what it covers, in one sentence that report, export and dump print
// first: only the last window of a longer recording, its span, how many
// earlier events rotated out, and why it was written.
std::string FlightWindowNote(const v1::TraceHeader& header);

}  // namespace gpuos
