// The hosts of a trace in the report: for a merged trace (gpuos-trace
// merge) each host with the skew its clock was moved by and how sure that
// is; for a single-host trace its one host, unmoved.
#pragma once

#include <ostream>

#include "export/report/json_writer.h"
#include "gpuos_trace.pb.h"

namespace gpuos {

// Nothing for a single-host trace (the header block names its host).
void WriteHostsText(const v1::TraceHeader& header, std::ostream& out);
// "hosts": [{"name", "skew_ns", "skew_bound_ns", ...}], always present.
void WriteHostsJson(const v1::TraceHeader& header, JsonWriter& json);

}  // namespace gpuos
