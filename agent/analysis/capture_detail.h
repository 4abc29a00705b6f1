// Which steps of a trace have full CUDA detail.  A trace recorded with
// --capture/--always-on (TraceHeader.capture_spec) has CUPTI's device
// records only inside capture windows, which the shim marks with
// CaptureWindow events (cupti_shim/capture_control.h); GPU-side step parts
// and GPU idle attribution mean something only for the steps inside one.
// A trace recorded without a spec has detail everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuos_trace.pb.h"

namespace gpuos {

struct StepRecord;

struct CaptureWindowSpan {
  uint32_t pid = 0;
  // The first and last step of the analysis inside the window (-1 when
  // none is), else the shim's own step numbers.
  int64_t first_step = -1;
  int64_t last_step = -1;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string reason;  // the spec, or "ctl capture N"
  bool closed = true;  // false: the trace ended with the window open
  // Opening it subscribed CUPTI again (taken out between windows).
  bool cupti_subscribed = false;
};

struct CaptureInfo {
  std::string spec;  // empty: CUDA detail all the time
  std::vector<CaptureWindowSpan> windows;
  // Why no window opened, where the trace shows it (NoteUncountedSteps).
  std::string note;
  bool in_use() const { return !spec.empty() || !windows.empty(); }
};

// Pairs each process's OPEN and CLOSE edges into windows.
class CaptureWindowCollector {
 public:
  void Add(const v1::Event& event);
  // A window still open at the end ends with the trace: the attach
  // window's end when `trailer` says it, else the last event's end.
  CaptureInfo Finish(const v1::TraceHeader& header, const v1::TraceTrailer* trailer = nullptr);

 private:
  uint64_t last_ns_ = 0;
  std::vector<CaptureWindowSpan> open_;
  std::vector<CaptureWindowSpan> done_;
};

// Sets each step's cuda_detail (steps of process `pid`): every step when
// capture is not in use; else the steps lying inside a window of `pid`
// (up to 1% of a step's time may fall outside: where steps come from
// other marks than the shim counted, their edges differ a little).  Fills the
// windows' first_step/last_step from the steps found inside.  In a window
// whose opening subscribed CUPTI again, the first of two or more steps
// inside is its window_start (step_breakdown.h).
void MarkCudaDetail(uint32_t pid, std::vector<StepRecord>& steps, CaptureInfo& capture);

// A spec that counts steps (steps=A..B, every=N,steps=K) opens windows only
// where the shim sees steps: marked (NVTX step ranges, the Python hook's
// marks; `marked_steps`), or counted live from the CUDA calls' rhythm
// (`live_rhythm_steps`: its marks are in the trace).  When no window
// opened, notes why and what works there.
void NoteUncountedSteps(bool marked_steps, bool live_rhythm_steps, CaptureInfo& capture);

}  // namespace gpuos
