// The decision behind capture windows, as pure logic (no clock, no CUPTI,
// no locks): fed the job's step marks, NVTX ranges, the time and on-demand
// requests, it says when a window of full CUDA detail opens and closes.
// capture_control.h feeds it from the shim's hooks and acts on its edges.
//
// Steps: a window for steps opens when a wanted step begins and closes when
// a step ends whose successor is not wanted, so a run of wanted steps is one
// window.  A step's number is the one its mark carries ("step 12"), else
// the one after the previous step's.  `RequestSteps(n)` (ctl capture N)
// wants the next n steps to begin, whatever the spec.  nvtx=NAME windows
// follow the ranges of that name (nested ones count once); time windows
// follow Tick().  Periodic specs (every=10s,...) follow Tick() too: each
// period's due time makes the next step to begin open a window of K steps,
// or, for every=P,for=D (and in a process whose steps marks never came, or
// stopped coming for a whole period), opens a window of D.  A window is
// open while any of these wants it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "capture_spec.h"

namespace gpuos_capture {

struct CaptureEdge {
  enum Kind { kNone, kOpen, kClose };
  Kind kind = kNone;
  // The step the window opens at or closes after; -1 when no step is
  // known (nvtx and time windows of a job without step marks).
  int64_t step = -1;
  // What opened the window: the spec's text or "ctl capture N".
  std::string reason;
};

// The report's default step rule (agent/analysis/step_options.h,
// kDefaultStepRegex: "step 12", "iteration 3", "Batch 7", "ProfilerStep#5",
// any case), without a regex engine in the job's process.
bool IsStepRangeName(std::string_view name);
// The number a step's name ends with ("step 12" -> 12), or -1.
int64_t StepNumber(std::string_view name);

// How far the next window is, seen from a step's end with no window open.
struct WindowGap {
  enum Kind {
    kSteps,    // `steps` steps run before the next window (0: the next one)
    kNone,     // no later window is known (the spec's windows are over, or
               // on-demand with no request): it may never come
    kUnknown,  // windows not bound to steps (nvtx=): no telling
    kTime,     // the next window is due in `ns` (periodic specs)
  };
  Kind kind = kUnknown;
  uint64_t steps = 0;
  uint64_t ns = 0;
};

// When a gap between windows is far enough to take CUPTI out of the process
// (finalize it, and subscribe again at the next window) rather than leave it
// subscribed with its device kinds off: GPUOS_CAPTURE_FINALIZE_GAP, a comma
// list of a step count and/or a duration ("500,10s"; "1" finalizes at
// every gap), or "off".
struct FinalizeGapPolicy {
  bool enabled = false;
  uint64_t min_steps = 0;  // 0: no step threshold
  uint64_t min_ns = 0;     // 0: no time threshold
  std::string text;
};
// 200 ms: on an H100 taking CUPTI out and subscribing again cost about 20 ms
// a cycle, while staying subscribed cost a 1 ms-step loop about 20% of every
// step (docs/capture-results.md); far gaps are where finalizing wins.
inline constexpr char kDefaultFinalizeGap[] = "200ms";
// Unset or empty text: the default.  False with one line in *error.
bool ParseFinalizeGap(std::string_view text, FinalizeGapPolicy* policy, std::string* error);
// Whether `gap` is far enough: no later window, or at least min_steps steps
// or (given the last step's length) at least min_ns; a gap in time
// likewise.
bool GapIsFar(const WindowGap& gap, const FinalizeGapPolicy& policy, uint64_t step_ns);

class CaptureWindows {
 public:
  explicit CaptureWindows(CaptureSpec spec) : spec_(std::move(spec)) {}

  // `index` < 0: the step after the previous one (0 for the first).
  CaptureEdge StepBegins(int64_t index);
  CaptureEdge StepEnds();
  CaptureEdge RangeBegins(std::string_view name);
  CaptureEdge RangeEnds(std::string_view name);
  // ns since the spec took effect (time and periodic specs).
  CaptureEdge Tick(uint64_t elapsed_ns);
  // When Tick() next has something to do, in ns since the spec took
  // effect; UINT64_MAX: never (specs not bound to time, or over).
  uint64_t NextTickNs(uint64_t elapsed_ns) const;
  // The next `n` steps to begin (counted from the next step start).
  void RequestSteps(uint64_t n);
  // With no window open: how far the next one is, from the step after the
  // current one.  Time windows: kNone once over, else kUnknown; periodic
  // ones: kTime from `elapsed_ns`.
  WindowGap NextWindowGap(uint64_t elapsed_ns = 0) const;

  bool open() const { return by_steps_ || by_range_ || by_time_; }
  const CaptureSpec& spec() const { return spec_; }
  int64_t current_step() const { return current_; }
  bool in_step() const { return in_step_; }

 private:
  bool StepWanted(uint64_t index) const;
  CaptureEdge Change(bool was_open, const std::string& reason);
  CaptureEdge PeriodicTick(uint64_t elapsed_ns);

  CaptureSpec spec_;
  int64_t current_ = -1;
  bool in_step_ = false;
  uint64_t demand_pending_ = 0;  // requested, not yet begun
  uint64_t demand_left_ = 0;     // steps of the request still to run, this one included
  std::string demand_reason_;
  bool by_steps_ = false, by_range_ = false, by_time_ = false;
  bool time_done_ = false;
  uint32_t range_depth_ = 0;
  bool steps_seen_ = false;
  // Periodic specs.
  bool first_due_ = true;        // the first period has not begun
  uint64_t next_due_ns_ = 0;     // the next period's start
  bool step_window_due_ = false;  // the next step to begin opens a window
  uint64_t periodic_left_ = 0;   // steps of the open window still to run, this one included
  uint64_t time_close_ns_ = 0;   // when an open time window closes
  std::string time_reason_;
};

}  // namespace gpuos_capture
