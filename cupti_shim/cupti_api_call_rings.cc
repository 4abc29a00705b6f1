#include "cupti_api_call_rings.h"

#include <pthread.h>

#include <cstdlib>
#include <new>

namespace gpuos_shim {

// Producer and consumer indexes on their own cache lines, so that the
// application's thread and the parser do not bounce one line per record.
struct ApiCallRings::Ring {
  explicit Ring(TimedApiCall* records_in) : records(records_in) {}
  ~Ring() { free(records); }
  TimedApiCall* const records;
  alignas(64) std::atomic<uint64_t> head{0};  // next record to write
  alignas(64) std::atomic<uint64_t> tail{0};  // next record to read
  // Set, after its last record, by the thread's exit: the consumer frees
  // the ring once it has read up to head.
  std::atomic<bool> thread_exited{false};
};

namespace {

std::atomic<uint64_t> g_next_generation{1};

// The calling thread's ring; a thread that recorded into another instance
// since finds a different generation and looks its ring up again.
struct ThreadRing {
  uint64_t generation = 0;
  void* ring = nullptr;
};
thread_local ThreadRing t_ring;

// Marks the thread's ring at its exit (a pthread key: unlike a
// thread_local object's destructor, it also runs when the thread was not
// created by C++).  Null when no key could be made (the process used up
// PTHREAD_KEYS_MAX): exited threads' rings are then never freed.
const pthread_key_t* ExitKey(void (*on_exit)(void*)) {
  static const pthread_key_t* key = [on_exit]() -> const pthread_key_t* {
    static pthread_key_t k;
    return pthread_key_create(&k, on_exit) == 0 ? &k : nullptr;
  }();
  return key;
}

size_t RoundUpToPowerOfTwo(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

ApiCallRings::ApiCallRings(size_t records_per_thread)
    : capacity_(RoundUpToPowerOfTwo(records_per_thread < 2 ? 2 : records_per_thread)),
      generation_(g_next_generation.fetch_add(1)) {
  ExitKey(&ApiCallRings::OnThreadExit);
}

// Every thread that recorded must have exited, or must never record
// again, by now (the shim's instance is never destroyed).
ApiCallRings::~ApiCallRings() {
  for (Ring* ring : rings_) delete ring;
}

void ApiCallRings::OnThreadExit(void* ring) {
  // A later call on this thread (from another key's destructor) gets a new
  // ring: this one may be freed as soon as the flag is seen.
  t_ring = ThreadRing{};
  static_cast<Ring*>(ring)->thread_exited.store(true, std::memory_order_release);
}

ApiCallRings::Ring* ApiCallRings::RingOfThisThread() {
  if (t_ring.generation == generation_) return static_cast<Ring*>(t_ring.ring);
  // Not zero-filled: a megabyte written on the application's thread for
  // nothing (each record is written whole before it is read).
  auto* records = static_cast<TimedApiCall*>(malloc(capacity_ * sizeof(TimedApiCall)));
  Ring* ring = records != nullptr ? new (std::nothrow) Ring(records) : nullptr;
  if (ring == nullptr) {
    free(records);
    return nullptr;  // dropped; tried again on the next call
  }
  {
    std::lock_guard<std::mutex> lock(rings_mu_);
    rings_.push_back(ring);
  }
  t_ring = ThreadRing{generation_, ring};
  if (const pthread_key_t* key = ExitKey(&ApiCallRings::OnThreadExit)) {
    pthread_setspecific(*key, ring);
  }
  return ring;
}

void ApiCallRings::Record(const TimedApiCall& call) {
  Ring* ring = RingOfThisThread();
  if (ring == nullptr) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t head = ring->head.load(std::memory_order_relaxed);
  if (head - ring->tail.load(std::memory_order_acquire) >= capacity_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ring->records[head & (capacity_ - 1)] = call;
  ring->head.store(head + 1, std::memory_order_release);
}

size_t ApiCallRings::Drain(const std::function<void(const TimedApiCall&)>& consume) {
  std::lock_guard<std::mutex> drain_lock(drain_mu_);
  std::vector<Ring*> rings;
  {
    std::lock_guard<std::mutex> lock(rings_mu_);
    rings = rings_;
  }
  size_t passed = 0;
  std::vector<Ring*> finished;
  for (Ring* ring : rings) {
    // The exit flag first: a ring seen finished has all its records below
    // the head read after it.
    const bool exited = ring->thread_exited.load(std::memory_order_acquire);
    const uint64_t head = ring->head.load(std::memory_order_acquire);
    uint64_t tail = ring->tail.load(std::memory_order_relaxed);
    for (; tail < head; ++tail) {
      consume(ring->records[tail & (capacity_ - 1)]);
      ++passed;
    }
    ring->tail.store(tail, std::memory_order_release);
    if (exited) finished.push_back(ring);
  }
  if (!finished.empty()) {
    {
      std::lock_guard<std::mutex> lock(rings_mu_);
      for (Ring* ring : finished) {
        for (size_t i = 0; i < rings_.size(); ++i) {
          if (rings_[i] == ring) {
            rings_[i] = rings_.back();
            rings_.pop_back();
            break;
          }
        }
      }
    }
    // Outside the lock, which a thread's first call takes.
    for (Ring* ring : finished) delete ring;
  }
  return passed;
}

}  // namespace gpuos_shim
