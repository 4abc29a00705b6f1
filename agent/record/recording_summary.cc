// The end-of-recording summary; see recording_summary.h.
#include "record/recording_summary.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"
#include "record/recording.h"
#include "record/shim_listener.h"

namespace gpuos {

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1ull << 20));
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.1f KiB", bytes / double(1ull << 10));
  return absl::StrFormat("%d B", bytes);
}

void PrintRecordingSummary(const Recording& recording, const ShimListener* shim_listener,
                           const std::string& output_path) {
  if (shim_listener && shim_listener->connections()) {
    fprintf(stderr, "gpuos-trace: %llu NVTX/CUDA events from %llu process(es) through the shim\n",
            static_cast<unsigned long long>(recording.shim_events()),
            static_cast<unsigned long long>(shim_listener->connections()));
  }
  if (const TorchBackwardProbes* torch = recording.torch_probes()) {
    for (const std::string& note : torch->notes()) fprintf(stderr, "gpuos-trace: note: %s\n", note.c_str());
  }
  for (const auto& [pid, stats] : recording.shim_status()) {
    if (!stats.cupti_active() && !stats.cupti_status().empty() &&
        stats.cupti_status().find("no gpuos-trace agent") == std::string::npos) {
      fprintf(stderr, "gpuos-trace: note: pid %u: %s\n", pid, stats.cupti_status().c_str());
    }
    uint64_t lost = stats.dropped_queue_full() + stats.dropped_send_failed() + stats.cupti_dropped_records();
    if (lost) {
      fprintf(stderr, "gpuos-trace: WARNING: pid %u: the CUDA shim lost %llu events\n", pid,
              static_cast<unsigned long long>(lost));
    }
  }
  if (shim_listener && shim_listener->rejected_peers()) {
    fprintf(stderr, "gpuos-trace: WARNING: refused %llu shim connection(s) from outside the traced tree\n",
            static_cast<unsigned long long>(shim_listener->rejected_peers()));
  }
  if (shim_listener && shim_listener->malformed_messages()) {
    fprintf(stderr, "gpuos-trace: WARNING: discarded %llu malformed message(s) on the shim socket\n",
            static_cast<unsigned long long>(shim_listener->malformed_messages()));
  }
  if (recording.dropped()) {
    fprintf(stderr,
            "gpuos-trace: WARNING: %llu events were dropped (ring buffer or kernel map full); "
            "try a larger --buffer-size\n",
            static_cast<unsigned long long>(recording.dropped()));
  }
  struct stat st {};
  if (stat(output_path.c_str(), &st) != 0) {
    fprintf(stderr, "gpuos-trace: no trace at %s: %s\n", output_path.c_str(), strerror(errno));
    return;
  }
  fprintf(stderr, "gpuos-trace: trace written to %s (%s); see: gpuos-trace report %s\n",
          output_path.c_str(), HumanBytes(static_cast<uint64_t>(st.st_size)).c_str(),
          output_path.c_str());
}

}  // namespace gpuos
