// CounterBuckets: see timeline/counter_buckets.h.
#include "export/timeline/counter_buckets.h"

#include <algorithm>
#include <limits>

namespace gpuos {

CounterBuckets::CounterBuckets(uint64_t bucket_ns) : bucket_ns_(std::max<uint64_t>(1, bucket_ns)) {}

void CounterBuckets::DefineTrack(uint32_t track, double scale) {
  auto [it, inserted] = slots_.try_emplace(track, states_.size());
  if (inserted) states_.emplace_back();
  states_[it->second].track = track;
  states_[it->second].scale = scale;
}

void CounterBuckets::Add(uint32_t track, uint64_t start, uint64_t end, double amount) {
  auto it = slots_.find(track);
  if (it == slots_.end() || amount == 0) return;
  State& state = states_[it->second];
  uint64_t first = start / bucket_ns_;
  // Late contributions (which the time-ordered input never produces) go to
  // the oldest open bucket rather than rewriting a reported one.
  first = std::max(first, closed_until_);
  if (end <= start) {
    state.open[first] += amount;
    return;
  }
  const double per_ns = amount / static_cast<double>(end - start);
  uint64_t bucket = first;
  uint64_t from = std::max(start, first * bucket_ns_);
  while (from < end) {
    const uint64_t bucket_end = bucket >= std::numeric_limits<uint64_t>::max() / bucket_ns_
                                    ? std::numeric_limits<uint64_t>::max()
                                    : (bucket + 1) * bucket_ns_;
    const uint64_t to = std::min(end, bucket_end);
    state.open[bucket] += per_ns * static_cast<double>(to - from);
    from = to;
    ++bucket;
  }
}

void CounterBuckets::Close(uint64_t end_bucket, const EmitFn& emit) {
  if (end_bucket <= closed_until_) return;
  pending_.clear();
  for (State& state : states_) {
    // Nothing open and already back at zero: nothing to report.
    if (state.open.empty() && (!state.emitted || state.last_value == 0)) continue;
    auto report = [&](uint64_t bucket, double value) {
      if (state.emitted && value == state.last_value) return;
      pending_.push_back({bucket * bucket_ns_, state.track, value});
      state.last_value = value;
      state.emitted = true;
    };
    while (!state.open.empty() && state.open.begin()->first < end_bucket) {
      auto first = state.open.begin();
      // A gap of empty buckets before this one reads as zero.
      if (first->first > state.next_bucket && state.emitted) report(state.next_bucket, 0);
      report(first->first, first->second * state.scale);
      state.next_bucket = first->first + 1;
      state.open.erase(first);
    }
    if (state.emitted && state.next_bucket < end_bucket) {
      report(state.next_bucket, 0);
      state.next_bucket = end_bucket;
    }
  }
  closed_until_ = end_bucket;
  // Counter values share one time-ordered stream across tracks.
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const Pending& x, const Pending& y) { return x.ts < y.ts; });
  for (const Pending& p : pending_) emit(p.ts, p.track, p.value);
}

void CounterBuckets::AdvanceTo(uint64_t ts, const EmitFn& emit) {
  const uint64_t end_bucket = ts / bucket_ns_;  // buckets wholly before ts
  if (end_bucket > closed_until_) Close(end_bucket, emit);
}

void CounterBuckets::Finish(const EmitFn& emit) {
  uint64_t last = closed_until_;
  for (const State& state : states_) {
    if (!state.open.empty()) last = std::max(last, state.open.rbegin()->first + 1);
  }
  Close(last, emit);
  // A final zero after the last bucket, so that the last value does not
  // appear to last forever.
  for (State& state : states_) {
    if (state.emitted && state.last_value != 0) {
      emit(state.next_bucket * bucket_ns_, state.track, 0);
      state.last_value = 0;
    }
  }
}

}  // namespace gpuos
