// A duration in nanoseconds as "12.345 ms", for the notes and messages
// that analysis writes (the reports' own number formats are in
// export/report/format.h).
#pragma once

#include <string>

#include "absl/strings/str_format.h"

namespace gpuos {

inline std::string MsText(double ns, int decimals = 3) { return absl::StrFormat("%.*f ms", decimals, ns / 1e6); }

}  // namespace gpuos
