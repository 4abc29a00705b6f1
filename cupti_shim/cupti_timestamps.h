// Which clock CUPTI stamps records with, and how they get to CLOCK_MONOTONIC.
//
// Two ways, chosen by GPUOS_CUPTI_TIMESTAMPS:
//   monotonic (default): a timestamp callback that reads CLOCK_MONOTONIC;
//              records need no mapping.
//   cupti:     no callback: CUPTI's own clock, read with cuptiGetTimestamp
//              for paired readings, mapped on the parser thread.  For
//              CUPTI builds whose registered callback yields zero kernel
//              timestamps (reported for some CUDA 12.6-13.0 builds).
// On an H100 the two cost a launch loop the same within noise, and a
// callback that read only the TSC was no cheaper (docs/archive/gpu-results.md):
// CUPTI's own kernel and API records, not the clock, are the cost.
// The mapped way takes paired readings at the start and then whenever the
// parser handles records (ClockConverter), so a clock that drifts from
// CLOCK_MONOTONIC (CUPTI's is CLOCK_REALTIME-like, which NTP slews) is
// followed.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "cupti_clock_converter.h"
#include "cupti_loader.h"

namespace gpuos_shim {

enum class TimestampSource { kMonotonicCallback, kCuptiClock };

class CuptiTimestamps {
 public:
  // Sets CUPTI's clock up; before any activity kind is enabled.  Returns
  // false with *error set when it could not (then nothing is recorded: the
  // records would not line up with the eBPF events).
  bool Setup(const CuptiApi& api, std::string* error);

  // "timestamps: ..." for the shim's status line, which the report shows.
  std::string Describe() const;

  // One more paired reading (mapped sources only; cheap: a few clock reads).
  void TakeReading();

  // Whether records need mapping at all (not with the monotonic callback).
  bool mapped() const;

  // The mapping as of now, for the parser to use on a batch of records
  // without a lock per timestamp.
  ClockConverter Snapshot() const;

 private:
  bool ReadPair(uint64_t* source, uint64_t* monotonic) const;

  mutable std::mutex mu_;
  const CuptiApi* api_ = nullptr;
  TimestampSource source_ = TimestampSource::kMonotonicCallback;
  ClockConverter converter_;
  bool mapped_ = false;
};

}  // namespace gpuos_shim
