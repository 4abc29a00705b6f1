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
//   on-demand           none until `gpuos-trace ctl --pid PID capture N`
// `--always-on` is every=200,steps=2: 1% of the steps, with CUPTI taken out
// of the process between windows (capture_windows.h, kDefaultFinalizeGap).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuos_capture {

struct CaptureSpec {
  enum Kind { kSteps, kEvery, kNvtx, kTime, kOnDemand };
  Kind kind = kOnDemand;
  uint64_t first_step = 0, last_step = 0;  // kSteps, inclusive
  uint64_t every = 0, count = 0;           // kEvery
  std::string nvtx_name;                   // kNvtx
  uint64_t after_ns = 0, for_ns = 0;       // kTime
  std::string text;                        // as given (trimmed)

  // Whether step `index` is inside a window of a step spec.
  bool WantsStep(uint64_t index) const;
};

inline constexpr char kAlwaysOnSpec[] = "every=200,steps=2";

// Returns false with one line in *error ("--capture steps=5..2: the last
// step is before the first") when `text` is not a spec.
bool ParseCaptureSpec(std::string_view text, CaptureSpec* spec, std::string* error);

// "30s", "1500ms", "2m", "10us" -> ns; false when not a duration.
bool ParseCaptureDuration(std::string_view text, uint64_t* ns);

}  // namespace gpuos_capture
