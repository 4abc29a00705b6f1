// CUPTI's timestamp source and its mapping onto CLOCK_MONOTONIC (see the
// header).
#include "cupti_timestamps.h"

#include <cstdlib>
#include <string>

#include "event_channel.h"

namespace gpuos_shim {
namespace {

// A paired reading whose two CLOCK_MONOTONIC reads are further apart than
// this was interrupted; it is taken again.
constexpr uint64_t kMaxReadingSpreadNs = 5'000;
constexpr int kReadingTries = 5;
constexpr TimestampSource kDefaultSource = TimestampSource::kMonotonicCallback;

uint64_t CUPTIAPI MonotonicTimestamp() { return MonotonicNs(); }

const char* SourceName(TimestampSource source) {
  switch (source) {
    case TimestampSource::kMonotonicCallback: return "CLOCK_MONOTONIC callback";
    case TimestampSource::kCuptiClock: return "CUPTI's clock, mapped to CLOCK_MONOTONIC";
  }
  return "?";
}

// The source GPUOS_CUPTI_TIMESTAMPS asks for, else the default.
TimestampSource ChosenTimestampSource() {
  const char* env = getenv("GPUOS_CUPTI_TIMESTAMPS");
  const std::string wanted = env != nullptr ? env : "";
  if (wanted == "monotonic") return TimestampSource::kMonotonicCallback;
  if (wanted == "cupti") return TimestampSource::kCuptiClock;
  return kDefaultSource;
}

}  // namespace

bool CuptiTimestamps::ReadPair(uint64_t* source, uint64_t* monotonic) const {
  if (source_ != TimestampSource::kCuptiClock) return false;
  for (int attempt = 0; attempt < kReadingTries; ++attempt) {
    const uint64_t before = MonotonicNs();
    uint64_t value = 0;
    if (api_->GetTimestamp(&value) != CUPTI_SUCCESS) return false;
    const uint64_t after = MonotonicNs();
    if (after - before <= kMaxReadingSpreadNs || attempt + 1 == kReadingTries) {
      *source = value;
      *monotonic = before + (after - before) / 2;
      return true;
    }
  }
  return false;
}

bool CuptiTimestamps::Setup(const CuptiApi& api, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  api_ = &api;
  source_ = ChosenTimestampSource();
  if (source_ == TimestampSource::kCuptiClock && api.GetTimestamp == nullptr) {
    source_ = TimestampSource::kMonotonicCallback;  // an old CUPTI: the one way left
  }
  mapped_ = source_ != TimestampSource::kMonotonicCallback;
  if (!mapped_) {
    const CUptiResult result = api.ActivityRegisterTimestampCallback(MonotonicTimestamp);
    if (result != CUPTI_SUCCESS) {
      *error = "cuptiActivityRegisterTimestampCallback failed: " + CuptiResultName(&api, result);
      return false;
    }
    return true;
  }
  // CUPTI's clock counts ns: a converter of nominal rate 1 with a first
  // reading.  (Nothing to undo if an earlier start registered a callback:
  // a mode is fixed for the life of the process.)
  uint64_t source = 0, monotonic = 0;
  if (!ReadPair(&source, &monotonic)) {
    *error = "cuptiGetTimestamp failed";
    return false;
  }
  converter_ = ClockConverter(1.0);
  converter_.AddReading(source, monotonic);
  return true;
}

std::string CuptiTimestamps::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::string("timestamps: ") + SourceName(source_);
}

void CuptiTimestamps::TakeReading() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!mapped_) return;
  uint64_t source = 0, monotonic = 0;
  if (ReadPair(&source, &monotonic)) converter_.AddReading(source, monotonic);
}

bool CuptiTimestamps::mapped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_;
}

ClockConverter CuptiTimestamps::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return converter_;
}

}  // namespace gpuos_shim
