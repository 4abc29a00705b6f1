// What a step's sequence of CUDA calls says; see step_api_calls.h.
#include "analysis/step_api_calls.h"

#include <algorithm>

#include "analysis/gpu_idle_attribution.h"
#include "analysis/step_timeline.h"

namespace gpuos {

void StepApiCalls::Sort() {
  if (sorted_) return;
  std::sort(calls_.begin(), calls_.end(), [](const StepApiCall& a, const StepApiCall& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  sorted_ = true;
}

std::vector<std::pair<uint64_t, uint64_t>> StepApiCalls::AwayFromCuda(uint64_t step_start, uint64_t step_end) {
  std::vector<std::pair<uint64_t, uint64_t>> stretches;
  if (calls_.empty()) return stretches;
  Sort();
  uint64_t cursor = step_start;
  uint8_t last_bits = 0;  // of the call that ended last
  auto away = [&](uint64_t until, bool feeds_gpu) {
    if (feeds_gpu && until > cursor + kHostWorkGapNs) stretches.emplace_back(cursor, until);
  };
  for (const StepApiCall& call : calls_) {
    away(call.from, call.bits & kApiCopiesToDevice);
    if (call.to >= cursor) last_bits = call.bits;
    cursor = std::max(cursor, call.to);
  }
  away(step_end, last_bits & kApiNextCopiesToDevice);
  return stretches;
}

uint64_t StepApiCalls::SyncsBetweenLaunches() {
  Sort();
  uint64_t syncs = 0;
  uint64_t sync_end = 0;        // of the last sync taken as a call: nested ones end inside it
  bool launched_since = false;  // a launch since that sync (or the step's start)
  bool pending = false;         // a sync after launches, waiting for a launch after it
  for (const StepApiCall& call : calls_) {
    if (call.api_class == CudaApiClass::kLaunch) {
      if (pending) ++syncs;
      pending = false;
      launched_since = true;
    } else if (call.api_class == CudaApiClass::kSync && call.from >= sync_end) {
      sync_end = call.to;
      pending = pending || launched_since;
      launched_since = false;
    }
  }
  return syncs;
}

uint64_t StepApiCalls::Allocations() {
  Sort();
  uint64_t calls = 0;
  uint64_t outer_end = 0;  // of the last allocation call counted: nested ones end inside it
  for (const StepApiCall& call : calls_) {
    if (call.api_class != CudaApiClass::kAllocate || call.from < outer_end) continue;
    outer_end = call.to;
    if (call.starts_in_step) ++calls;
  }
  return calls;
}

}  // namespace gpuos
