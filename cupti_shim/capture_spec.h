// What `--capture SPEC` means: which steps, NVTX ranges or stretches of
// time get full CUDA detail (CUPTI's per-kernel records), the OS side being
// recorded all the time.  Plain C++ with no dependencies: the agent parses
// the spec to refuse a bad one before anything starts, and the shim parses
// the same text (GPUOS_CAPTURE, or a "capture" request on its control
// socket) to open and close windows as the job runs (capture_windows.h).
//
//   steps=A..B          steps A to B (the step's number: "step 12" -> 12;
//                       unnumbered steps count from 0)
//   every=N,steps=K     K steps in every N: steps i with i % N < K
//   nvtx=NAME           while an NVTX range named NAME is open
//   after=60s,for=10s   one window, from 60 s after the start for 10 s
//   every=10s,steps=K   K steps every 10 s: the first K steps, then the
//                       first K to begin after each 10 s (a process with no
//                       step marks gets a time window of
//                       kUnmarkedWindowNs instead)
//   every=10s,for=200ms a window of 200 ms every 10 s, from the start
//   on-demand           none until `gpuos-trace ctl --pid PID capture N`
// `--always-on` is every=10s,steps=2, with CUPTI taken out of the process
// between windows (capture_windows.h, kDefaultFinalizeGap): what a window
// costs is paid once per period, not once per so many steps, so a loop of
// 1 ms steps pays no more than one of 100 ms steps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuos_capture {

struct CaptureSpec {
  enum Kind { kSteps, kEvery, kNvtx, kTime, kOnDemand, kPeriodic };
  Kind kind = kOnDemand;
  uint64_t first_step = 0, last_step = 0;  // kSteps, inclusive
  uint64_t every = 0, count = 0;           // kEvery; kPeriodic: count steps
  uint64_t period_ns = 0;                  // kPeriodic: every=DURATION
  std::string nvtx_name;                   // kNvtx
  uint64_t after_ns = 0, for_ns = 0;       // kTime; kPeriodic: for_ns
  std::string text;                        // as given (trimmed)

  // Whether step `index` is inside a window of a step spec (kPeriodic's
  // windows depend on the time: capture_windows.h).
  bool WantsStep(uint64_t index) const;
  // Windows counted in steps the process marks (steps=, every=N,steps=K):
  // none opens in a process without step marks.
  bool CountsSteps() const { return kind == kSteps || kind == kEvery; }
  // Windows a timer opens or closes (after=,for=; every=DURATION).
  bool TimerDriven() const { return kind == kTime || kind == kPeriodic; }
};

inline constexpr char kAlwaysOnSpec[] = "every=10s,steps=2";
// every=P,steps=K in a process without step marks: windows of this long.
inline constexpr uint64_t kUnmarkedWindowNs = 200'000'000;

// Returns false with one line in *error ("--capture steps=5..2: the last
// step is before the first") when `text` is not a spec.
bool ParseCaptureSpec(std::string_view text, CaptureSpec* spec, std::string* error);

// "30s", "1500ms", "2m", "10us" -> ns; false when not a duration.
bool ParseCaptureDuration(std::string_view text, uint64_t* ns);

}  // namespace gpuos_capture
