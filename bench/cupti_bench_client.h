// What the CUPTI benchmark clients (cupti_floor_injection.cc,
// cupti_phase_ab.cu) share: the least a CUPTI activity client must do.
// 8 MiB buffers handed to CUPTI, records walked and counted, nothing else;
// and a CLOCK_MONOTONIC timestamp callback like gpuos-trace's shim's.
#pragma once

#include <cupti.h>

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <ctime>

namespace cupti_bench {

constexpr size_t kBufferBytes = size_t{8} << 20;
inline std::atomic<unsigned long long> g_records{0};
// Buffers from fresh anonymous pages (mmap), which are zero without anyone
// writing them, for a client that tells CUPTI its buffers come zeroed
// (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER).  Not calloc: once an
// 8 MiB block has been freed, malloc serves the next from its heap and
// calloc clears it on the requesting thread, which is what the setting is
// meant to spare.  Set before CUPTI asks for a buffer.
inline bool g_fresh_page_buffers = false;

inline void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (g_fresh_page_buffers) {
    void* pages = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    *buffer = pages != MAP_FAILED ? static_cast<uint8_t*>(pages) : nullptr;
  } else {
    *buffer = static_cast<uint8_t*>(aligned_alloc(64, kBufferBytes));
  }
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

inline void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  unsigned long long n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++n;
  g_records += n;
  if (g_fresh_page_buffers) {
    munmap(buffer, kBufferBytes);
  } else {
    free(buffer);
  }
}

inline uint64_t CUPTIAPI MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace cupti_bench
