#include "cupti_buffer_pool.h"

#include <sys/mman.h>

#include <cstring>

namespace gpuos_shim {

ActivityBufferPool::~ActivityBufferPool() { FreeIdle(); }

void ActivityBufferPool::SetZeroed(bool zeroed) {
  if (zeroed && !zeroed_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint8_t* buffer : idle_) memset(buffer, 0, buffer_bytes_);
  }
  zeroed_.store(zeroed, std::memory_order_relaxed);
}

uint8_t* ActivityBufferPool::Take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      uint8_t* buffer = idle_.back();
      idle_.pop_back();
      return buffer;
    }
    if (allocated_ >= max_buffers_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    ++allocated_;  // reserve the slot; allocate outside the lock
  }
  // Fresh anonymous pages are zero without anyone writing them (malloc's
  // heuristics might instead hand out a recycled chunk that calloc must
  // clear here, on an application thread).  Page-aligned; CUPTI needs 8.
  void* memory =
      mmap(nullptr, buffer_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    std::lock_guard<std::mutex> lock(mu_);
    --allocated_;
    refused_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  return static_cast<uint8_t*>(memory);
}

void ActivityBufferPool::Return(uint8_t* buffer) {
  if (buffer == nullptr) return;
  // The whole buffer, not only the records CUPTI said were valid: where it
  // wrote past them is not documented.
  if (zeroed()) memset(buffer, 0, buffer_bytes_);
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(buffer);
}

void ActivityBufferPool::FreeIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint8_t* buffer : idle_) munmap(buffer, buffer_bytes_);
  allocated_ -= idle_.size();
  idle_.clear();
}

size_t ActivityBufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

}  // namespace gpuos_shim
