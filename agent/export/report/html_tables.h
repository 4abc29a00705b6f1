// The report page's CUDA/NVTX and OS sections: ranked tables of kernels,
// copies, API calls, syncs and NVTX ranges; processes, threads and syscalls.
// Part of the page html_report.h writes.
#pragma once

#include <ostream>

#include "analysis/cuda_summary.h"
#include "analysis/os_summary.h"
#include "export/report/html_report.h"

namespace gpuos {

// The CUDA and NVTX section, then the processes, threads and syscalls one.
void WriteHtmlTableSections(const OsSummary& os, const CudaSummary& cuda, const HtmlReportOptions& options,
                            std::ostream& out);

}  // namespace gpuos
