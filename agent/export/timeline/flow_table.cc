// FlowTable: see timeline/flow_table.h.
#include "export/timeline/flow_table.h"

#include <algorithm>

namespace gpuos {

void FlowTable::AddApiCall(uint32_t pid, uint32_t correlation_id) {
  if (correlation_id != 0) api_keys_.push_back(Key(pid, correlation_id));
}

void FlowTable::AddGpuWork(uint32_t pid, uint32_t correlation_id) {
  if (correlation_id != 0) gpu_keys_.push_back(Key(pid, correlation_id));
}

void FlowTable::Seal() {
  std::sort(api_keys_.begin(), api_keys_.end());
  api_keys_.erase(std::unique(api_keys_.begin(), api_keys_.end()), api_keys_.end());
  std::sort(gpu_keys_.begin(), gpu_keys_.end());
  // Keep only keys that have both ends: most API calls (cudaMalloc,
  // cudaGetDevice...) have no GPU work, and work may lack its call.
  std::vector<uint64_t> api_matched;
  std::vector<uint64_t> gpu_matched;
  auto a = api_keys_.begin();
  auto g = gpu_keys_.begin();
  while (a != api_keys_.end() && g != gpu_keys_.end()) {
    if (*a < *g) {
      ++a;
    } else if (*g < *a) {
      ++g;
    } else {
      api_matched.push_back(*a);
      for (; g != gpu_keys_.end() && *g == *a; ++g) gpu_matched.push_back(*g);
      ++a;
    }
  }
  api_keys_.swap(api_matched);
  gpu_keys_.swap(gpu_matched);
  api_keys_.shrink_to_fit();
  gpu_keys_.shrink_to_fit();
}

uint64_t FlowTable::FlowId(uint64_t key, uint32_t index) {
  // splitmix64 of (key, index): ids only need to be distinct within the
  // trace, and nonzero.
  uint64_t z = key * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

uint32_t FlowTable::MatchedGpuCount(uint64_t key) const {
  auto range = std::equal_range(gpu_keys_.begin(), gpu_keys_.end(), key);
  return static_cast<uint32_t>(range.second - range.first);
}

void FlowTable::MaybeForget(uint64_t key, const InFlight& state, uint32_t total) {
  if (state.api_seen && state.gpu_seen >= total) in_flight_.erase(key);
}

void FlowTable::OnApiCall(uint32_t pid, uint32_t correlation_id, std::vector<uint64_t>* starts,
                          std::vector<uint64_t>* ends) {
  if (correlation_id == 0) return;
  const uint64_t key = Key(pid, correlation_id);
  const uint32_t total = MatchedGpuCount(key);
  if (total == 0) return;
  InFlight& state = in_flight_[key];
  if (state.api_seen) return;  // a second call with the same id: no flows
  state.api_seen = true;
  // Work already drawn started its flow; the rest is still to come.
  for (uint32_t i = 0; i < total; ++i) {
    (i < state.gpu_seen ? ends : starts)->push_back(FlowId(key, i));
  }
  flows_ += total;
  MaybeForget(key, state, total);
}

void FlowTable::OnGpuWork(uint32_t pid, uint32_t correlation_id, std::vector<uint64_t>* starts,
                          std::vector<uint64_t>* ends) {
  if (correlation_id == 0) return;
  const uint64_t key = Key(pid, correlation_id);
  const uint32_t total = MatchedGpuCount(key);
  if (total == 0) return;
  InFlight& state = in_flight_[key];
  if (state.gpu_seen >= total) return;  // cannot happen: pass 1 counted them all
  const uint64_t id = FlowId(key, state.gpu_seen++);
  (state.api_seen ? ends : starts)->push_back(id);
  MaybeForget(key, state, total);
}

}  // namespace gpuos
