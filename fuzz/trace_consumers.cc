// Every consumer of a .gpuos file, run on one file; see trace_consumers.h.
#include "trace_consumers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "analysis/diagnosis.h"
#include "analysis/rank_analysis.h"
#include "analysis/step_analysis.h"
#include "analysis/trace_summary.h"
#include "export/report/cuda_report.h"
#include "export/event_dump.h"
#include "export/report/html_report.h"
#include "export/report/json_writer.h"
#include "export/report/os_report.h"
#include "export/report/rank_report.h"
#include "export/perfetto/perfetto_export.h"
#include "export/report/step_report.h"
#include "stream/trace_completeness.h"

namespace gpuos_fuzz {

MemoryFile::MemoryFile() {
  fd_ = memfd_create("gpuos-fuzz", MFD_CLOEXEC);
  if (fd_ < 0) {
    perror("memfd_create");
    abort();
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemoryFile::~MemoryFile() { close(fd_); }

void MemoryFile::Set(const std::string& bytes) {
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, bytes.data(), bytes.size(), 0) !=
                                    static_cast<ssize_t>(bytes.size())) {
    perror("memfd write");
    abort();
  }
}

namespace {

// libprotobuf logs every string field that is not UTF-8 as it refuses it;
// at thousands of inputs a second that is only noise (the refusal itself
// is what the targets exercise).
const bool kProtobufQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// Exports go to a private directory, made once and removed at exit; each
// export replaces the outputs of the one before.
char g_export_dir[] = "/tmp/gpuos-fuzz-export.XXXXXX";

const char* ExportDir() {
  static const bool made = [] {
    if (mkdtemp(g_export_dir) == nullptr) {
      perror("mkdtemp");
      abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(g_export_dir, ignored);
    });
    return true;
  }();
  (void)made;
  return g_export_dir;
}

}  // namespace

void ConsumeTrace(const std::string& path) {
  auto reason = gpuos::IncompleteReasonOfFile(path);
  (void)reason;
  std::ostringstream out;
  auto summary = gpuos::SummarizeTrace(path);
  auto steps = gpuos::AnalyzeSteps(path, gpuos::StepOptions());
  auto ranks = gpuos::AnalyzeRanks(path, gpuos::StepOptions());
  if (summary.ok() && steps.ok() && ranks.ok()) {
    gpuos::Diagnosis diagnosis = gpuos::Diagnose(*steps, ranks->straggler ? &*ranks->straggler : nullptr);
    gpuos::WriteOsTextReport(summary->os, out);
    gpuos::WriteCudaTextReport(summary->cuda, out);
    gpuos::WriteStepTextReport(*steps, diagnosis, out);
    gpuos::WriteRankTextReport(*ranks, out, steps->pid);
    gpuos::WriteOsJsonReport(summary->os, out, [&](gpuos::JsonWriter& json) {
      gpuos::WriteCudaJsonMembers(summary->cuda, json);
      gpuos::WriteStepJsonMembers(*steps, diagnosis, json);
      gpuos::WriteRankJsonMembers(*ranks, json);
    });
    gpuos::WriteHtmlReport(*summary, *steps, diagnosis, out, gpuos::HtmlReportOptions(), &*ranks);
  }
  (void)gpuos::DumpTraceAsJsonLines(path, out);
  gpuos::ExportOptions options;
  options.chrome_json_path = std::string(ExportDir()) + "/out.json";
  options.temp_dir = ExportDir();
  options.sort_buffer_bytes = 1 << 20;
  if (steps.ok()) {
    for (const gpuos::StepRecord& step : steps->steps) {
      options.steps.push_back({step.start_ns, step.end_ns, static_cast<int64_t>(step.index), steps->pid});
    }
  }
  auto exported = gpuos::ExportTrace(path, std::string(ExportDir()) + "/out.pftrace", options);
  (void)exported;
}

}  // namespace gpuos_fuzz
