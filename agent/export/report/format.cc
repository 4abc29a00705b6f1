// Report number formats; see report/format.h.
#include "export/report/format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace gpuos {

std::string FormatMs3(double ns) { return absl::StrFormat("%.3f", ns / 1e6); }

std::string FormatMsAutoDecimals(double ns) {
  const double ms = ns / 1e6;
  if (std::fabs(ms) >= 100) return absl::StrFormat("%.1f", ms);
  if (std::fabs(ms) >= 1) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3f", ms);
}

std::string FormatUs1(double ns) { return absl::StrFormat("%.1f", ns / 1e3); }

std::string FormatMiB1(double bytes) { return absl::StrFormat("%.1f", bytes / 1048576.0); }

std::string FormatPct1(double share) { return absl::StrFormat("%.1f", share * 100); }

double Share(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

}  // namespace gpuos
