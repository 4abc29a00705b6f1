// Capture windows in the traced process; see capture_control.h.
#include "capture_control.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "capture_windows.h"
#include "event_channel.h"
#include "fork_handlers.h"
#include "live_step_rhythm.h"
#include "optimizer_step_cycle.h"
#include "wire_encoder.h"
#ifdef GPUOS_SHIM_HAS_CUPTI
#include "cupti_injection.h"
#endif

namespace gpuos_shim {
namespace {

using gpuos_capture::CaptureEdge;
using gpuos_capture::CaptureSpec;
using gpuos_capture::CaptureWindows;
using gpuos_capture::FinalizeGapPolicy;

constexpr std::string_view kPythonDomain = "gpuos.python";
// The marks of steps counted from the CUDA calls' rhythm
// (agent/analysis/step_options.h, kLiveRhythmDomain).
constexpr std::string_view kRhythmDomain = "gpuos.rhythm";

struct Capture {
  // Guards everything below, and serializes edges with the CUPTI switch
  // they make (CUPTI's callbacks into the shim only try it, for 2 ms at
  // most: CaptureOnStepCallReturn).
  std::mutex mu;
  CaptureWindows* windows = nullptr;  // null: no spec
  bool from_request = false;          // set by "capture <spec>", not GPUOS_CAPTURE
  uint64_t armed_ns = 0;              // when the spec took effect (time windows)
  uint64_t generation = 0;            // a new spec ends the previous one's timer
  // Written under mu; also read without it, by the range hooks' filter
  // (RangeMayMatter).
  std::atomic<uint32_t> step_tid{0};           // the thread whose NVTX step ranges count
  std::atomic<bool> nvtx_steps{false};         // NVTX step ranges seen: Python marks no longer count
  std::atomic<bool> python_optimizer{false};   // an optimizer.step seen: backward no longer counts
  std::atomic<bool> follows_range_name{false};  // an nvtx=NAME spec: any range may be NAME
  bool python_step_open = false;
  bool python_backward_seen = false;  // a backward pass returned before any step began
  gpuos_capture::OptimizerStepCycle optimizer_cycle;  // which optimizer's returns end steps
  uint64_t step_begin_ns = 0;  // the current step's start
  uint64_t step_ns = 0;        // the last step's length
};

// 0: not read yet; 1: no spec; 2: a spec.
std::atomic<int> g_state{0};
// Set once the job marks steps itself: the calls' rhythm is not needed.
std::atomic<bool> g_rhythm_unused{false};
// Whether the spec in force counts steps from the calls' rhythm where the
// job marks none: one not driven by the timer (time-driven ones take CUPTI
// out between windows, and fall back to time windows there).
std::atomic<bool> g_rhythm_wanted{false};

Capture& C() {
  static Capture* capture = new Capture();
  return *capture;
}

// The live count, apart from Capture: fed from CUPTI's callbacks, which
// must never wait on the capture lock for long (its holder may be calling
// into CUPTI).
struct Rhythm {
  std::mutex mu;
  gpuos_capture::LiveStepRhythm count;
};
Rhythm& R() {
  static Rhythm* rhythm = new Rhythm();
  return *rhythm;
}

// Never called with C().mu or R().mu held by another thread in the child:
// the fork handlers hold both across fork() (never held together
// elsewhere).
void CaptureForkPrepare() {
  C().mu.lock();
  R().mu.lock();
}
void CaptureForkRelease() {
  R().mu.unlock();
  C().mu.unlock();
}

void SendEdge(const CaptureEdge& edge, uint64_t ts_ns, bool cupti_subscribed = false) {
  ProtoWriter payload;
  payload.Uint(field::kCaptureEdge, edge.kind == CaptureEdge::kOpen ? 1 : 2);
  payload.Int(field::kCaptureStep, edge.step);
  payload.Text(field::kCaptureReason, edge.reason);
  if (cupti_subscribed) payload.Bool(field::kCaptureCuptiSubscribed, true);
  SubmitEvent(EncodeEvent(ts_ns, CurrentPid(), CurrentTid(), field::kEventCaptureWindow,
                          payload));
}

// GPUOS_CAPTURE_FINALIZE_GAP, read once (capture_windows.h).
const FinalizeGapPolicy& FinalizeGap() {
  static const FinalizeGapPolicy* policy = [] {
    auto* parsed = new FinalizeGapPolicy();
    const char* text = getenv("GPUOS_CAPTURE_FINALIZE_GAP");
    std::string error;
    if (!gpuos_capture::ParseFinalizeGap(text != nullptr ? text : "", parsed, &error)) {
      fprintf(stderr, "gpuos-shim: %s; CUPTI stays subscribed between windows\n", error.c_str());
    }
    return parsed;
  }();
  return *policy;
}

// CUPTI's device kinds on or off; on, after CUPTI was taken out of the
// process between windows, it comes back first.  Returns whether it did
// (subscribed again: the calling step paid for that).
bool SwitchDetail(bool on) {
#ifdef GPUOS_SHIM_HAS_CUPTI
  const bool was_out = on && CuptiSuspended();
  if (on) ResumeCuptiForWindow();
  SetDeviceActivityEnabled(on);
  return was_out && !CuptiSuspended() && CuptiActivityActive();
#else
  (void)on;
  return false;
#endif
}

// Called with C().mu held, with no window open, at a window's end or a
// step's end: takes CUPTI out of the process when the next window is far
// (cupti_injection.h says where it refuses).
void SuspendIfGapIsFar(const Capture& c) {
#ifdef GPUOS_SHIM_HAS_CUPTI
  // Asked at every step's end between windows: where CUPTI is out already
  // (or never came in) that is all.
  if (CuptiSuspended() || !CuptiActivityActive()) return;
  const FinalizeGapPolicy& policy = FinalizeGap();
  if (!policy.enabled || c.windows == nullptr || c.windows->open()) return;
  const gpuos_capture::WindowGap gap = c.windows->NextWindowGap(MonotonicNs() - c.armed_ns);
  if (gap.kind == gpuos_capture::WindowGap::kUnknown) {
    // Said where the user asked for finalizing; the default says nothing.
    static const bool chosen = getenv("GPUOS_CAPTURE_FINALIZE_GAP") != nullptr;
    if (chosen) {
      NoteCuptiStaysSubscribed(StaysSubscribed::kUnforeseeableGap);
    }
    return;
  }
  if (!gpuos_capture::GapIsFar(gap, policy, c.step_ns)) return;
  // The next window opens at a step's start: only marks that come without
  // CUPTI can bring it back (a time window that is over needs none, and
  // the timer brings back periodic ones, by time where marks stop).
  if (!c.windows->spec().TimerDriven() && !c.nvtx_steps && !c.python_step_open) {
    NoteCuptiStaysSubscribed(StaysSubscribed::kNoStepMarks);
    return;
  }
  SuspendCuptiBetweenWindows(policy.text);
#else
  (void)c;
#endif
}

// Called with C().mu held.
void Apply(const CaptureEdge& edge, uint64_t ts_ns) {
  if (edge.kind == CaptureEdge::kNone) return;
  if (edge.kind == CaptureEdge::kOpen) {
    const bool subscribed = SwitchDetail(true);
    SendEdge(edge, ts_ns, subscribed);
  } else {
    SendEdge(edge, ts_ns);
    SwitchDetail(false);
    SuspendIfGapIsFar(C());
  }
}

// The job marks steps itself (called with C().mu held): the calls' rhythm
// is not needed, nor the callbacks that feed it.
void MarksCountSteps() {
  // A load first: this runs at every step mark, the exchange once.
  if (g_rhythm_unused.load(std::memory_order_relaxed) || g_rhythm_unused.exchange(true)) return;
#ifdef GPUOS_SHIM_HAS_CUPTI
  SetStepCallCallbacks(false);
#endif
}

void TimerLoop(uint64_t generation);

// Called with C().mu held.  No spec: detail all the time.
bool DetailWanted(const Capture& c) { return c.windows == nullptr || c.windows->open(); }

// Called with C().mu held.  Replaces the spec (closing an open window).
void InstallSpec(const CaptureSpec* spec, bool from_request) {
  Capture& c = C();
  if (c.windows != nullptr && c.windows->open()) {
    CaptureEdge close;
    close.kind = CaptureEdge::kClose;
    close.step = c.windows->current_step();
    close.reason = "the spec was replaced";
    Apply(close, MonotonicNs());
  }
  delete c.windows;
  c.windows = spec != nullptr ? new CaptureWindows(*spec) : nullptr;
  c.from_request = from_request;
  c.follows_range_name = spec != nullptr && spec->kind == CaptureSpec::kNvtx;
  c.armed_ns = MonotonicNs();
  ++c.generation;
  g_state.store(spec != nullptr ? 2 : 1, std::memory_order_release);
  // A new spec counts from scratch: its steps are learned again.
  const bool rhythm = spec != nullptr && !spec->TimerDriven();
  {
    std::lock_guard<std::mutex> lock(R().mu);
    R().count = gpuos_capture::LiveStepRhythm();
  }
  g_rhythm_wanted.store(rhythm, std::memory_order_relaxed);
#ifdef GPUOS_SHIM_HAS_CUPTI
  SetStepCallCallbacks(rhythm && !g_rhythm_unused.load());
#endif
  if (spec != nullptr && spec->TimerDriven()) {
    // The job's signals stay with the job's threads.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    std::thread timer(TimerLoop, c.generation);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    pthread_setname_np(timer.native_handle(), "gpuos-capture");
    timer.detach();
  }
  SwitchDetail(DetailWanted(c));
}

// Sleeps to each edge of a time window or period (in steps of at most
// 100 ms, to notice a new spec), and makes it.
void TimerLoop(uint64_t generation) {
  for (;;) {
    uint64_t wait_ns = 0;
    {
      Capture& c = C();
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.generation != generation || c.windows == nullptr) return;
      const uint64_t now = MonotonicNs();
      const uint64_t elapsed = now - c.armed_ns;
      Apply(c.windows->Tick(elapsed), now);
      const uint64_t next = c.windows->NextTickNs(elapsed);
      if (next == UINT64_MAX) return;
      wait_ns = next > elapsed ? next - elapsed : 0;
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(wait_ns, 100'000'000)));
  }
}

// Reads GPUOS_CAPTURE once per process (a fork child inherits the result).
bool InUse() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == 0) {
    static std::once_flag once;
    std::call_once(once, [] {
      JoinForkHandling(ForkPart::kCaptureWindows,
                       {CaptureForkPrepare, CaptureForkRelease, CaptureForkRelease});
      const char* text = getenv("GPUOS_CAPTURE");
      CaptureSpec spec;
      std::string error;
      Capture& c = C();
      std::lock_guard<std::mutex> lock(c.mu);
      if (g_state.load() != 0) return;  // a request came first
      const bool ok = text != nullptr && *text != '\0' && gpuos_capture::ParseCaptureSpec(text, &spec, &error);
      InstallSpec(ok ? &spec : nullptr, false);
    });
    state = g_state.load(std::memory_order_acquire);
  }
  return state == 2;
}

// A time spec counts from the process's start, not from its first NVTX or
// CUDA call.
__attribute__((constructor)) void ArmFromEnvironment() {
  const char* text = getenv("GPUOS_CAPTURE");
  if (text != nullptr && *text != '\0') InUse();
}

void OnStepBegin(Capture& c, int64_t index, uint64_t ts_ns) {
  c.step_begin_ns = ts_ns;
  Apply(c.windows->StepBegins(index), ts_ns);
}
void OnStepEnd(Capture& c, uint64_t ts_ns) {
  if (c.step_begin_ns != 0 && ts_ns > c.step_begin_ns) c.step_ns = ts_ns - c.step_begin_ns;
  const CaptureEdge edge = c.windows->StepEnds();
  Apply(edge, ts_ns);
  // A gap that began far (the start, before the first window) or that a
  // step's length now shows is far.
  if (edge.kind == CaptureEdge::kNone) SuspendIfGapIsFar(c);
}

void SendRhythmMark(std::string_view call_name, uint32_t tid, uint64_t ts_ns) {
  ProtoWriter payload;
  payload.Text(field::kNvtxMarkName, call_name);
  payload.Text(field::kNvtxMarkDomain, kRhythmDomain);
  SubmitEvent(EncodeEvent(ts_ns, CurrentPid(), tid, field::kEventNvtxMark, payload));
}

// Whether a range's begin or end can change anything, decided without the
// capture lock: a training step makes several ranges and one or two of
// them are step edges.  Mirrors the locked paths of CaptureOnRangeBegin
// and CaptureOnRangeEnd; where it says yes they decide.
bool RangeMayMatter(bool begin, std::string_view domain, std::string_view name, uint32_t tid) {
  const Capture& c = C();
  if (c.follows_range_name.load(std::memory_order_relaxed)) return true;
  if (domain == kPythonDomain) {
    if (begin || c.nvtx_steps.load(std::memory_order_relaxed)) return false;
    return gpuos_capture::OptimizerNumber(name) != 0 ||
           (name == "autograd.backward" && !c.python_optimizer.load(std::memory_order_relaxed));
  }
  if (!gpuos_capture::IsStepRangeName(name)) return false;
  const uint32_t step_tid = c.step_tid.load(std::memory_order_relaxed);
  return tid == step_tid || (begin && step_tid == 0);
}

// The capture lock within 2 ms, or not at all.
bool LockBriefly(std::mutex& mu) {
  const uint64_t give_up = MonotonicNs() + 2'000'000;
  while (!mu.try_lock()) {
    if (MonotonicNs() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

void CaptureOnStepCallReturn(uint32_t call_id, std::string_view call_name, uint32_t tid, uint64_t end_ns) {
  if (g_rhythm_unused.load(std::memory_order_relaxed) || !g_rhythm_wanted.load(std::memory_order_relaxed)) return;
  gpuos_capture::LiveStepRhythm::Outcome outcome;
  {
    Rhythm& r = R();
    std::lock_guard<std::mutex> lock(r.mu);
    outcome = r.count.Add(tid, call_id, end_ns);
  }
  if (outcome.kind == gpuos_capture::LiveStepRhythm::Outcome::kNone) return;
  // The marks first: the report's steps follow them even where this edge
  // cannot be made.
  if (outcome.kind == gpuos_capture::LiveStepRhythm::Outcome::kFound) {
    for (uint64_t ts : outcome.ends) SendRhythmMark(call_name, tid, ts);
  } else {
    SendRhythmMark(call_name, tid, end_ns);
  }
  Capture& c = C();
  if (!LockBriefly(c.mu)) return;
  std::lock_guard<std::mutex> lock(c.mu, std::adopt_lock);
  if (c.windows == nullptr || c.nvtx_steps || c.python_step_open || c.windows->spec().TimerDriven()) return;
  // Marks never count here, so a step under way is the rhythm's last one.
  if (c.windows->in_step()) OnStepEnd(c, end_ns);
  OnStepBegin(c, outcome.step, end_ns);
}

bool CaptureWindowsInUse() { return InUse(); }

bool CaptureCountsCallRhythm() {
  return g_rhythm_wanted.load(std::memory_order_relaxed) && !g_rhythm_unused.load(std::memory_order_relaxed);
}

bool CaptureDetailWanted() {
  if (!InUse()) return true;
  // Under the lock: a "capture" request replaces (deletes) c.windows.
  Capture& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  return DetailWanted(c);
}

void CaptureOnRangeBegin(std::string_view domain, std::string_view name, uint64_t ts_ns, uint32_t tid) {
  if (!InUse() || !RangeMayMatter(/*begin=*/true, domain, name, tid)) return;
  Capture& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.windows == nullptr) return;
  Apply(c.windows->RangeBegins(name), ts_ns);
  if (domain == kPythonDomain || !gpuos_capture::IsStepRangeName(name)) return;
  if (c.step_tid == 0) c.step_tid = tid;
  if (tid != c.step_tid) return;
  c.nvtx_steps = true;
  MarksCountSteps();
  OnStepBegin(c, gpuos_capture::StepNumber(name), ts_ns);
}

void CaptureOnRangeEnd(std::string_view domain, std::string_view name, uint64_t ts_ns, uint32_t tid) {
  if (!InUse() || !RangeMayMatter(/*begin=*/false, domain, name, tid)) return;
  Capture& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.windows == nullptr) return;
  if (domain == kPythonDomain) {
    if (c.nvtx_steps) return;
    // A step ends where the update returns; the next begins there.  Step i
    // runs from the (i-1)th mark's end to the i-th's, as the report numbers
    // steps from marks (analysis/step_finder.cc): the first optimizer.step's
    // return begins step 1.  A loop with no optimizer counts its backward
    // passes, from the second one's return (step 2): at the first, an
    // optimizer.step may still follow, and step 1 would then begin at the
    // wrong mark.  (With gradient accumulation the backward passes before
    // the first update count as steps 2..k, until that update starts the
    // count again at 1.)  Where several optimizers step, only the returns
    // of the one that closes the cycle count (optimizer_step_cycle.h).
    const uint32_t optimizer_number = gpuos_capture::OptimizerNumber(name);
    const bool optimizer = optimizer_number != 0;
    const bool first_optimizer = optimizer && !c.python_optimizer;
    if (optimizer) c.python_optimizer = true;
    if (!optimizer && !(name == "autograd.backward" && !c.python_optimizer)) return;
    MarksCountSteps();
    if (optimizer) {
      const gpuos_capture::OptimizerStepCycle::Outcome o = c.optimizer_cycle.Add(optimizer_number);
      if (o.began_at >= 0) {
        // The cycle is known now, and this return ends the report's step 1
        // (begun at an earlier return; here the provisional steps were
        // counted instead): step 2 begins, as in the report.
        if (c.python_step_open) OnStepEnd(c, ts_ns);
        OnStepBegin(c, 2, ts_ns);
        c.python_step_open = true;
        return;
      }
      if (!o.ends_step) return;
      // An optimizer took over: its earlier returns since the old
      // boundary's last ended steps in the report; count them here.
      for (uint32_t k = 0; k < o.earlier_boundaries && c.python_step_open; ++k) {
        OnStepEnd(c, ts_ns);
        OnStepBegin(c, -1, ts_ns);
      }
    }
    if (!optimizer && !c.python_step_open && !c.python_backward_seen) {
      c.python_backward_seen = true;
      return;
    }
    if (c.python_step_open) OnStepEnd(c, ts_ns);
    OnStepBegin(c, first_optimizer ? 1 : c.python_step_open ? -1 : 2, ts_ns);
    c.python_step_open = true;
    return;
  }
  if (gpuos_capture::IsStepRangeName(name) && tid == c.step_tid) OnStepEnd(c, ts_ns);
  Apply(c.windows->RangeEnds(name), ts_ns);
}

std::string HandleCaptureRequest(std::string_view argument) {
  InUse();  // GPUOS_CAPTURE first, so that a request replaces it and not the reverse
  while (!argument.empty() && argument.front() == ' ') argument.remove_prefix(1);
  Capture& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  bool digits = !argument.empty();
  uint64_t n = 0;
  for (char ch : argument) {
    digits = digits && ch >= '0' && ch <= '9';
    if (digits) n = n * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (digits && argument.size() <= 9) {
    if (c.windows == nullptr) {
      return "error this process records CUDA detail all the time (traced without --capture): "
             "nothing to capture";
    }
    if (n == 0) return "error capture needs a number of steps above 0";
    c.windows->RequestSteps(n);
    return "capture the next " + std::to_string(n) + " steps" +
           (c.nvtx_steps || c.python_step_open ? "" : " (no step marks seen in this process yet)");
  }
  if (argument == "off") {
    InstallSpec(nullptr, true);
    return "capture off: CUDA detail all the time";
  }
  CaptureSpec spec;
  std::string error;
  if (!gpuos_capture::ParseCaptureSpec(argument, &spec, &error)) return "error " + error;
  InstallSpec(&spec, true);
  return "capture " + spec.text;
}

void ResetCaptureAfterDetach() {
  if (g_state.load() == 0) return;
  Capture& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.from_request) return;
  const char* text = getenv("GPUOS_CAPTURE");
  CaptureSpec spec;
  std::string error;
  const bool ok = text != nullptr && *text != '\0' && gpuos_capture::ParseCaptureSpec(text, &spec, &error);
  InstallSpec(ok ? &spec : nullptr, false);
}

}  // namespace gpuos_shim
