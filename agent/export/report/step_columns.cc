// The step table's columns; see report/step_columns.h.
#include "export/report/step_columns.h"

#include "absl/strings/str_format.h"
#include "export/report/format.h"

namespace gpuos {

const std::vector<StepColumn>& StepColumns() {
  static const std::vector<StepColumn>* columns = new std::vector<StepColumn>{
      {"ms", [](const StepRecord& s) { return static_cast<double>(s.duration_ns()); }, true},
      {"data", [](const StepRecord& s) { return static_cast<double>(s.cpu.data_wait_ns); }, true},
      {"sync", [](const StepRecord& s) { return static_cast<double>(s.cpu.sync_ns); }, true, true},
      {"copy", [](const StepRecord& s) { return static_cast<double>(s.cpu.copy_api_ns); }, true, true},
      {"launch", [](const StepRecord& s) { return static_cast<double>(s.cpu.launch_api_ns); }, true, true},
      {"cuda other", [](const StepRecord& s) { return static_cast<double>(s.cpu.other_cuda_api_ns); }, true, true},
      {"other", [](const StepRecord& s) { return static_cast<double>(s.cpu.other_ns); }, true, true},
      {"off-CPU", [](const StepRecord& s) { return static_cast<double>(s.off_cpu.total()); }, true},
      {"GPU kern", [](const StepRecord& s) { return static_cast<double>(s.gpu.kernel_busy_ns); }, true, true},
      {"GPU comm", [](const StepRecord& s) { return static_cast<double>(s.gpu.comm_only_ns); }, true, true},
      {"GPU copy", [](const StepRecord& s) { return static_cast<double>(s.gpu.copy_only_ns); }, true, true},
      {"GPU idle", [](const StepRecord& s) { return static_cast<double>(s.gpu.idle_ns); }, true, true},
      {"kernels", [](const StepRecord& s) { return static_cast<double>(s.gpu.kernels_started); }, false, true},
      {"inv sw", [](const StepRecord& s) { return static_cast<double>(s.os.launching.involuntary); }, false},
      {"munmap", [](const StepRecord& s) { return static_cast<double>(s.os.munmap.calls); }, false},
  };
  return *columns;
}

std::string StepCell(const StepColumn& column, double value, bool statistic) {
  if (column.is_ms) return FormatMs3(value);
  return statistic ? absl::StrFormat("%.1f", value) : absl::StrFormat("%.0f", value);
}

double DetailStepsSlowdown(const StepAnalysis& a) {
  if (!GpuSideOverFewerSteps(a) || a.duration_ns.count == 0 || a.all_steps_duration_ns.p50 <= 0) return 0;
  return a.duration_ns.p50 / a.all_steps_duration_ns.p50 - 1;
}

std::string WindowStartsLeftOut(const StepAnalysis& a) {
  if (a.window_start_steps == 0) return "";
  return absl::StrFormat("; the first step of %d window%s left out: it paid for subscribing CUPTI again",
                         a.window_start_steps, a.window_start_steps == 1 ? "" : "s");
}

size_t CudaDetailSteps(const StepAnalysis& a) {
  size_t n = 0;
  for (const StepRecord& s : a.steps) n += s.cuda_detail && (a.summary_includes_warmup || !s.warmup);
  return n;
}

}  // namespace gpuos
