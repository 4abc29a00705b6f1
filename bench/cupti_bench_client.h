// What the CUPTI benchmark clients (cupti_floor_injection.cc,
// cupti_phase_ab.cu) share: the least a CUPTI activity client must do.
// 8 MiB buffers handed to CUPTI, records walked and counted, nothing else;
// and a CLOCK_MONOTONIC timestamp callback like gpuos-trace's shim's.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <ctime>

namespace cupti_bench {

constexpr size_t kBufferBytes = size_t{8} << 20;
inline std::atomic<unsigned long long> g_records{0};

inline void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(64, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

inline void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  unsigned long long n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++n;
  g_records += n;
  free(buffer);
}

inline uint64_t CUPTIAPI MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace cupti_bench
