// Steps counted live, inside the traced process, from the rhythm of CUDA API
// calls: how step-count capture specs (steps=A..B, every=N,steps=K,
// `ctl capture N`) open windows in a job that marks no steps (an attached
// job, a script run with --no-python-hooks, C++ without NVTX).
//
// A training loop makes some call once a step, or k times a step: the
// loss's device-to-host copy and the synchronize that waits for it, the
// batch's host-to-device copies, a graph launch.  The shim's CUPTI
// callbacks feed the ends of such calls (per thread and call id) here; the
// rule is the analysis' (agent/analysis/api_rhythm.h, with the same
// interval statistics: interval_regularity.h, but stricter: see
// LiveRhythmOptions), applied to every k-th call:
//   - the last (min_steps + 1) * k calls of one (thread, call), every k-th
//     of them an anchor, the phase chosen so that anchors end the longest
//     gaps (a synchronizing call's wait belongs to the step it finishes),
//     and for k > 1 the anchor's gap the longest in every step;
//   - regular when the anchors' intervals average at least min_interval_ns
//     with a coefficient of variation of at most max_cv, the longest
//     excused_fraction of them set aside as pauses;
//   - k > 1 only for calls irregular one by one (bunched within steps:
//     regular but too close calls are sub-step work);
//   - the smallest k that is regular wins, and the first (thread, call) to
//     become regular is the step's call (the finest rhythm is counted
//     first).
// Step i runs from anchor i's end to anchor i+1's; the anchors inside the
// learning window are steps 0, 1, ... so the count begins min_steps steps
// before it is known.  The shim sends every anchor as a mark, so the report
// finds the very steps the windows were opened on.  Pure logic: no clock,
// no CUPTI, no locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuos_capture {

struct LiveRhythmOptions {
  // Stricter than the analysis' rule (5 calls, CV 0.25 over the whole
  // trace): the decision is made live on a few intervals, and with 12 of
  // them at CV 0.25, uniformly random calls (0.1-20 ms apart) passed in 20
  // of 200 runs of 2,000 calls; at 16 and 0.15, in none.
  uint32_t min_steps = 16;               // anchor intervals before the rhythm counts
  uint64_t min_interval_ns = 1'000'000;  // as StepOptions::rhythm_min_interval_ns
  double max_cv = 0.15;
  double excused_fraction = 0.1;         // as StepOptions::rhythm_excused_fraction
  uint32_t max_calls_per_step = 4;
  size_t max_series = 64;                // (thread, call) pairs followed while learning; the
                                         // quietest gives way to a new one
};

class LiveStepRhythm {
 public:
  explicit LiveStepRhythm(LiveRhythmOptions options = {}) : options_(options) {}

  struct Outcome {
    enum Kind {
      kNone,
      kFound,    // the rhythm is known from this call on: `ends` are the anchors so far
      kStepEnd,  // this call ends step `step - 1`
    };
    Kind kind = kNone;
    // kFound: every anchor's end, oldest first; the last is this call's.
    std::vector<uint64_t> ends;
    // kFound, kStepEnd: the step that begins at this call's end.
    int64_t step = -1;
  };

  // A call with id `call` on thread `tid` returned at `end_ns` (calls of
  // one thread come in order).
  Outcome Add(uint32_t tid, uint32_t call, uint64_t end_ns);

  bool found() const { return found_; }
  uint32_t tid() const { return anchor_tid_; }
  uint32_t call() const { return anchor_call_; }
  uint32_t calls_per_step() const { return calls_per_step_; }

 private:
  struct Series {
    uint32_t tid = 0;
    uint32_t call = 0;
    std::vector<uint64_t> ends;  // the last LearningCalls(max_calls_per_step) ends
  };
  // Whether `s`'s last calls are regular every `k`-th, ending at its last
  // call; fills the anchors' ends.
  bool RegularEvery(const Series& s, uint32_t k, std::vector<uint64_t>* anchors) const;
  // Whether single calls of `s` are irregular (they come in bunches).
  bool BunchedCalls(const Series& s) const;
  size_t LearningCalls(uint32_t k) const { return (static_cast<size_t>(options_.min_steps) + 1) * k; }

  LiveRhythmOptions options_;
  std::vector<Series> series_;
  bool found_ = false;
  uint32_t anchor_tid_ = 0;
  uint32_t anchor_call_ = 0;
  uint32_t calls_per_step_ = 1;
  uint32_t calls_since_anchor_ = 0;
  int64_t step_ = -1;  // the step under way
};

}  // namespace gpuos_capture
