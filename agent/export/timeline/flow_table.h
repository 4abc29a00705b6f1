// Flow arrows from a CUDA API call (cudaLaunchKernel, cudaMemcpyAsync...) to
// the GPU work it caused, matched by (pid, correlation id).
//
// Perfetto wants each flow id to start once (flow_ids) and end once
// (terminating_flow_ids), so an id is only handed out when both ends exist.
// Pass 1 records which keys have an API call and how many GPU activities each
// key has (a CUDA graph launch has many); pass 2 asks, in time order, which
// ids to put on each event.  An activity that starts before its call (clock
// skew) starts the flow and the call ends it, so both ends still exist.
//
// Memory: 8 bytes per API call and per GPU activity in pass 1, shrunk to the
// keys that matched; pass 2 holds state only for keys with work in flight.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuos {

class FlowTable {
 public:
  // Pass 1.  Correlation id 0 means "none" and is ignored.
  void AddApiCall(uint32_t pid, uint32_t correlation_id);
  void AddGpuWork(uint32_t pid, uint32_t correlation_id);
  // Between the passes.
  void Seal();

  // Pass 2, in time order: appends the flow ids to start and to end on this
  // event.  Only the first API call of a key carries flows.
  void OnApiCall(uint32_t pid, uint32_t correlation_id, std::vector<uint64_t>* starts,
                 std::vector<uint64_t>* ends);
  void OnGpuWork(uint32_t pid, uint32_t correlation_id, std::vector<uint64_t>* starts,
                 std::vector<uint64_t>* ends);

  uint64_t flows() const { return flows_; }

 private:
  struct InFlight {
    uint32_t gpu_seen = 0;
    bool api_seen = false;
  };
  static uint64_t Key(uint32_t pid, uint32_t correlation_id) {
    return (static_cast<uint64_t>(pid) << 32) | correlation_id;
  }
  static uint64_t FlowId(uint64_t key, uint32_t index);
  // GPU activities of `key` that have an API call; 0 when none or no call.
  uint32_t MatchedGpuCount(uint64_t key) const;
  void MaybeForget(uint64_t key, const InFlight& state, uint32_t total);

  std::vector<uint64_t> api_keys_;  // sorted, unique after Seal
  std::vector<uint64_t> gpu_keys_;  // sorted, one entry per activity
  absl::flat_hash_map<uint64_t, InFlight> in_flight_;
  uint64_t flows_ = 0;
};

}  // namespace gpuos
