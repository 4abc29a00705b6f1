// `gpuos-trace dump FILE`: every record of a trace as one JSON object per
// line (the header first, then each event, then the trailer), in the
// proto3 JSON mapping with the .proto's field names.  For scripts and
// checks that need individual events rather than summaries; note that the
// mapping writes 64-bit integers as strings.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace gpuos {

// Returns the reader's status: events before any damage are written.
absl::Status DumpTraceAsJsonLines(const std::string& path, std::ostream& out);

}  // namespace gpuos
