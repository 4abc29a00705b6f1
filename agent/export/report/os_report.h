// Renders an OsSummary for people (text tables) and for programs (JSON).
#pragma once

#include <functional>
#include <ostream>

#include "analysis/os_summary.h"
#include "export/report/json_writer.h"

namespace gpuos {

// Per-process and per-thread tables, then the syscall ranking ("the most
// expensive OS calls"), then drops and read errors.
void WriteOsTextReport(const OsSummary& summary, std::ostream& out);

// The JSON document of `gpuos-trace report --format json`.
void WriteOsJsonReport(const OsSummary& summary, std::ostream& out);
// The same, with more members (CUDA, steps...) written by `extra_members` at
// the end of the top-level object.
void WriteOsJsonReport(const OsSummary& summary, std::ostream& out,
                       const std::function<void(JsonWriter&)>& extra_members);

}  // namespace gpuos
