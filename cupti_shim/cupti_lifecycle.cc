// The lifecycle of CUDA activity collection (Kineto's
// CuptiActivityProfiler's part): the injection entry point, starting at
// launch or attach, stopping at detach, stepping aside for another CUPTI
// client, fork and exit.  See cupti_injection.h; the parts it drives are
// listed in cupti_collection_state.h.
#include "cupti_injection.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "shim_control_server.h"
#include "capture_control.h"
#include "cupti_activity_api.h"
#include "cupti_api_callbacks.h"
#include "cupti_collection_state.h"
#include "cupti_finalize.h"
#include "cupti_parser.h"
#include "event_channel.h"
#include "fork_handlers.h"
#include "import_redirect.h"

namespace gpuos_shim {
namespace {

// How long a stop waits for a start in progress on another thread.
constexpr auto kStartWaitTimeout = std::chrono::seconds(10);

void AtExit() {
  State& s = S();
  if (InForkChild() || getpid() != s.owner_pid || !s.active.load()) return;
  // libcupti's own teardown follows this handler: the parser must not be
  // inside CUPTI then.
  KeepParserOutOfCupti();
  FlushAndDrain(kExitDrainTimeout);
}

// Waits (bounded) for a start in progress on another thread to finish.
void WaitWhileStarting() {
  State& s = S();
  const Clock::time_point deadline = Clock::now() + kStartWaitTimeout;
  while (s.phase.load() == kStarting && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Stops collection: no new records (every kind disabled), every buffer
// through the parser into the event channel, then CUPTI detached
// (finalized where allowed and safe, else unsubscribed).  Returns false
// when collection was not running; *how says how it ended.
bool StopCollection(bool allow_finalize, std::string* how) {
  State& s = S();
  WaitWhileStarting();
  int expected = kOn;
  if (!s.phase.compare_exchange_strong(expected, kStopping)) return false;
  s.active = false;
  s.api_by_callbacks = false;  // what the rings hold is drained below
  {
    std::lock_guard<std::mutex> lock(s.device_mu);
    s.device_kinds.clear();
    s.gated_api_callbacks.clear();
    s.device_on = false;
  }
  s.api_timing_gated_off = false;  // the next collection's timing starts on
  KeepParserOutOfCupti();
  const CuptiApi& api = *s.api;
  DisableAllKinds(api);
  const bool drained = FlushAndDrain(kExitDrainTimeout);
  std::string note;
  bool finalized = false;
  if (!allow_finalize) {
    note = "left initialized for the next client";
  } else if (!drained) {
    note = "not finalized: the parser still held buffers";
  } else {
    finalized = FinalizeCupti(&note);
  }
  if (!finalized) api.Unsubscribe(s.subscriber);
  s.subscriber = nullptr;
  FreePooledBuffers();
  if (finalized) {
    *how = note.empty() ? "CUPTI finalized" : "CUPTI finalized, but " + note;
  } else {
    *how = "CUPTI unsubscribed (" + note + ")";
  }
  s.phase = kOff;
  return true;
}

// fork(): the child has no parser thread, and CUPTI's state is the
// parent's; the buffer locks are held across the fork so that the child
// finds them free.
void CollectionForkPrepare() {
  S().buffers.LockForFork();
  S().queue_mu.lock();
}
void CollectionForkParent() {
  S().queue_mu.unlock();
  S().buffers.UnlockAfterFork();
}
void CollectionForkChild() {
  State& s = S();
  s.in_fork_child.store(true);
  s.phase = kOff;
  s.active = false;
  s.api_by_callbacks = false;
  // The parent's records are not ours, and its parser may have held a
  // ring lock at the fork: left behind (leaked), and a new set made if
  // this process starts collecting.
  s.api_rings = nullptr;
  s.wanted = false;
  s.parser_started = false;
  s.parser_may_call_cupti = false;
  s.parser_in_cupti = false;
  s.finalize_state = kNoFinalize;
  s.suspended = false;
  s.runtime_graph_captures = 0;
  s.driver_graph_captures = 0;
  s.graphs_launched = false;
  // Their waiters were the parent's threads.
  new (&s.queue_cv) std::condition_variable();
  new (&s.drained_cv) std::condition_variable();
  s.queue_mu.unlock();
  s.buffers.UnlockAfterFork();
}

// Debug setting and fork handlers, once per process (a fork child inherits
// both).
void InitOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    S().debug = getenv("GPUOS_SHIM_DEBUG") != nullptr;
    JoinForkHandling(ForkPart::kCuptiCollection,
                     {CollectionForkPrepare, CollectionForkParent, CollectionForkChild});
  });
}

// Another CUPTI client of this process (Kineto, when the job starts
// torch.profiler) is about to subscribe.  CUPTI takes one subscriber, so the
// later one would fail and the job's own profiler would see no GPU activity:
// we hand over instead.  What we recorded so far is flushed and kept.
void StepAsideForAnotherClient() {
  State& s = S();
  if (InForkChild() || getpid() != s.owner_pid || !s.active.load()) return;
  std::string how;
  if (!StopCollection(/*allow_finalize=*/false, &how)) return;
  Disable("stepped aside at " + std::to_string(MonotonicNs()) +
          " ns (CLOCK_MONOTONIC) for another CUPTI client in the process (torch.profiler?): "
          "CUDA activity after that is not recorded");
  FlushEvents();
}

// Subscribing first: if another tool holds CUPTI, nothing global (the
// timestamp source, buffer callbacks) may be changed under it.  Returns
// false, CUPTI left as it was and the status set, where any step failed.
bool Subscribe(const CuptiApi& api, const std::string& source) {
  State& s = S();
  CUptiResult result = api.Subscribe(&s.subscriber, OnCuptiCallback, nullptr);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    Disable(
        "another CUPTI subscriber is active (torch.profiler, Nsight Systems?): CUDA "
        "activity not recorded");
    return false;
  }
  if (result != CUPTI_SUCCESS) {
    Disable(source + ": cuptiSubscribe failed: " + CuptiResultName(&api, result) +
            ": CUDA activity not recorded");
    return false;
  }
  // Before any kind is enabled, so every record is on a clock we can map
  // onto CLOCK_MONOTONIC.  (Again on every start: cuptiFinalize at a
  // detach forgets the callback.)
  std::string clock_error;
  if (!s.timestamps.Setup(api, &clock_error)) {
    api.Unsubscribe(s.subscriber);
    Disable(source + ": " + clock_error +
            ": CUDA activity not recorded (its clock would not match)");
    return false;
  }
  result = RegisterBufferCallbacks(api);
  if (result != CUPTI_SUCCESS) {
    api.Unsubscribe(s.subscriber);
    Disable(source + ": cuptiActivityRegisterCallbacks failed: " + CuptiResultName(&api, result) +
            ": CUDA activity not recorded");
    return false;
  }
  return true;
}

// Neither kernels nor copies could be enabled: nothing worth recording.
void GiveUpWithoutKinds(const CuptiApi& api, const std::string& source) {
  State& s = S();
  if (!LaunchMode()) {
    // An attached process is left as it was found.
    for (CUpti_ActivityKind kind : kAllKinds) api.ActivityDisable(kind);
    KeepParserOutOfCupti();
  }
  // Frees CUPTI for another tool; what little was enabled stays harmless.
  s.api_by_callbacks = false;
  api.Unsubscribe(s.subscriber);
  s.subscriber = nullptr;
  Disable(source +
          " could enable neither kernel nor memcpy activity: CUDA activity not "
          "recorded");
}

// Subscribes, registers the timestamp and buffer callbacks, enables the
// kinds; the same whether CUDA starts now (InitializeInjection) or runs
// already (attach).  Called by the one thread that moved the phase to
// kStarting.  Returns whether records are being collected.
// `resuming`: for a capture window after a suspension (with the capture
// lock held by the caller: detail stays on, and problems are kept).
bool BeginCollection(bool cuda_running, bool resuming) {
  State& s = S();
  CaptureWindowsInUse();  // reads GPUOS_CAPTURE now, not under device_mu later
  CuptiLoadResult loaded = LoadCupti();
  if (loaded.api == nullptr) {
    Disable(loaded.error + ": CUDA activity not recorded");
    return false;
  }
  const CuptiApi& api = *loaded.api;
  s.api = &api;
  const std::string source = "CUPTI " + std::to_string(api.version) + " from " + api.library_path +
                             (api.was_loaded ? " (already loaded)" : "");
  if (!resuming) {
    // Each attach reports its own problems.
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.problem_text.clear();
    s.problem_kinds.clear();
  }
  if (!Subscribe(api, source)) return false;
  ConfigureActivityBuffers(api);
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status = source;
  }
  // API records' tid must be the kernel's thread id, as in the eBPF events.
  CuptiOk("cuptiSetThreadIdType", api.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  BuildApiTablesOnce(api);
  EnableTeardownCallbacks(api);
  // Always: detach finalizes too, and must know whether graphs ran.
  EnableGraphCallbacks(api);
  if (CaptureCountsCallRhythm()) SwitchStepCallCallbacks(api, true);
  LetParserIntoCupti();
  if (!s.parser_started) {
    StartParserThread();
    s.parser_started = true;
  }
  s.active = true;

  const EnabledKinds kinds = EnableActivityKinds(api, cuda_running);
  if (!kinds.kernels && !kinds.copies) {
    GiveUpWithoutKinds(api, source);
    return false;
  }
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status =
        source + ", " + kinds.api_records + KindsNote() + ", " + s.timestamps.Describe() +
        (kinds.serialised_kernels ? ", kernels serialised (no concurrent-kernel tracing)" : "");
    status = ComposeStatusLocked(s);
  }
  SetCuptiStatus(true, status);
  if (!resuming) SetDeviceActivityEnabled(CaptureDetailWanted());
  if (!s.atexit_registered) {
    atexit(AtExit);
    s.atexit_registered = true;
  }
  return true;
}

// Starts collection unless it runs or is starting already.  `wait`: wait
// out a start in progress elsewhere (never on a thread inside cuInit: the
// other start may be waiting for cuInit to finish).  `cuda_running`: CUDA
// was initialized before this start (attach mid-run).
bool StartCollection(bool wait, bool cuda_running, bool resuming = false) {
  State& s = S();
  if (s.finalize_state.load() == kFinalizing) {
    Disable("CUPTI is still being finalized after the last detach: attach again later");
    return false;
  }
  int expected = kOff;
  if (!s.phase.compare_exchange_strong(expected, kStarting)) {
    if (wait) WaitWhileStarting();
    return s.phase.load() == kOn;
  }
  s.owner_pid = getpid();
  const bool started = BeginCollection(cuda_running, resuming);
  s.phase = started ? kOn : kOff;
  return started;
}

// Serializes the decisions (not the work) of cuInit and attach/detach, so
// that a status one of them sets never overwrites the other's.  Never held
// while calling CUDA or CUPTI.
std::mutex& DecisionMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

// The driver calls InitializeInjection inside cuInit.
void OnCudaInjection() {
  State& s = S();
  InitOnce();
  // This process has not touched CUPTI before (the once-flag says so), so
  // whatever a fork set does not apply: a child that starts CUDA itself gets
  // its own collection.
  s.in_fork_child = false;
  s.owner_pid = getpid();
  RestartListenerIfForked();
  if (LaunchMode()) {
    StartCollection(/*wait=*/false, /*cuda_running=*/false);
    return;
  }
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(DecisionMutex());
    s.cuda_up = true;
    start = s.wanted.load();
    s.awaiting_cuinit = false;
    if (!start) {
      Disable(AttachPossible()
                  ? "idle: CUDA is up; CUPTI is not subscribed until gpuos-trace attaches"
                  : "no gpuos-trace agent (GPUOS_SHIM_SOCKET unset): CUDA activity not recorded");
    }
  }
  // Attached before CUDA started: collection starts here, inside cuInit,
  // as in a launched trace.
  if (start) StartCollection(/*wait=*/false, /*cuda_running=*/false);
}

// Where CUPTI must stay subscribed between capture windows.
constexpr const char* kStaysText[] = {
    "", "a stream was being captured into a CUDA graph",
    "a CUDA context was being torn down (or the device reset)",
    "the last cuptiFinalize has not finished",
    "the next window's distance cannot be foreseen (nvtx= and time windows)",
    "the steps come from no NVTX or Python mark, which run without CUPTI",
    "the job launches CUDA graphs, which cuptiFinalize can break"};
bool SuspensionRefused(StaysSubscribed* why) {
  State& s = S();
  if (s.runtime_graph_captures.load() > 0 || s.driver_graph_captures.load() > 0) {
    *why = StaysSubscribed::kGraphCapture;
  } else if (s.graphs_launched.load()) {
    *why = StaysSubscribed::kGraphsLaunched;
  } else if (s.context_torn_down.load()) {
    *why = StaysSubscribed::kContextTornDown;
  } else if (s.finalize_state.load() != kNoFinalize) {
    *why = StaysSubscribed::kFinalizePending;
  } else {
    return false;
  }
  return true;
}

// The status says, from now on, that CUPTI leaves between windows.
void NoteSuspension(const std::string& policy, const std::string& how) {
  State& s = S();
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    ++s.suspensions;
    s.capture_note = "; between capture windows: " + how + " (" + std::to_string(s.suspensions) +
                     " gaps so far; GPUOS_CAPTURE_FINALIZE_GAP=" + policy + ")";
    status = ComposeStatusLocked(s);
  }
  SetCuptiStatus(true, status);
}

}  // namespace

bool StartCuptiForAttach(std::string* status) {
  State& s = S();
  InitOnce();
  if (InForkChild()) {
    Disable("a fork child of a process that used CUDA, where CUDA cannot run: CUDA activity "
            "not recorded");
    *status = CurrentStatus();
    return false;
  }
  // Injected rather than preloaded, the shim's cuptiSubscribe does not
  // interpose for libraries already loaded (Kineto's): point their imports
  // at it, so that torch.profiler still gets CUPTI from us.  (Preloaded,
  // they point at it already, and nothing is written.)
  const size_t redirected = RedirectImports(
      "cuptiSubscribe", reinterpret_cast<void*>(&cuptiSubscribe), reinterpret_cast<void*>(&cuptiSubscribe));
  if (redirected > 0 && s.debug) {
    fprintf(stderr, "gpuos-shim: cuptiSubscribe imports redirected to the shim: %zu\n", redirected);
  }
  // Asked before taking the decision lock: a driver call may wait for a
  // cuInit in progress, whose InitializeInjection waits for that lock.
  const Driver driver = ProcessDriver();
  const bool initialized = CudaInitialized(driver);
  const bool injection_pending = EnvNamesThisShim("CUDA_INJECTION64_PATH");
  enum { kStartNow, kAtCuInit, kNoCuda } plan;
  {
    std::lock_guard<std::mutex> lock(DecisionMutex());
    if (s.cuda_up.load() || initialized) {
      plan = kStartNow;
    } else if (injection_pending) {
      // CUDA will call InitializeInjection at cuInit, which starts it.
      plan = kAtCuInit;
      Disable("waiting for CUDA: collection starts when the process initializes CUDA (cuInit)");
    } else if (driver.loaded) {
      // Injected before the process initialized CUDA: CUPTI's activity API,
      // enabled before cuInit, records from CUDA's start.
      plan = kStartNow;
    } else {
      plan = kNoCuda;
      Disable("this process has not loaded CUDA (libcuda.so.1): CUDA activity not recorded");
    }
    s.wanted = plan != kNoCuda;
    s.awaiting_cuinit = plan == kAtCuInit;
  }
  bool started = false;
  if (plan == kStartNow) {
    started = StartCollection(/*wait=*/true, /*cuda_running=*/s.cuda_up.load() || initialized);
  }
  // A cuInit that came between the decision and here started it already.
  if (plan == kAtCuInit) started = s.phase.load() == kOn;
  *status = CurrentStatus();
  return started;
}

void StopCuptiForDetach() {
  State& s = S();
  bool was_waiting = false, was_suspended = false;
  {
    std::lock_guard<std::mutex> lock(DecisionMutex());
    was_waiting = s.awaiting_cuinit.exchange(false);
    was_suspended = s.suspended.exchange(false);
    s.wanted = false;
  }
  if (InForkChild()) return;
  std::string how;
  if (StopCollection(/*allow_finalize=*/true, &how)) {
    Disable("stopped at detach (" + std::to_string(MonotonicNs()) + " ns CLOCK_MONOTONIC): " + how);
  } else if (was_suspended) {
    Disable("stopped at detach (" + std::to_string(MonotonicNs()) +
            " ns CLOCK_MONOTONIC), between capture windows");
  } else if (was_waiting) {
    Disable("detached before the process initialized CUDA");
  }
}

bool CuptiSuspended() { return S().suspended.load(std::memory_order_relaxed); }

bool SuspendCuptiBetweenWindows(const std::string& policy) {
  State& s = S();
  // Asked at every step's end while CUPTI is not active: no system call
  // before that test.
  if (!s.active.load() || InForkChild() || getpid() != s.owner_pid) return false;
  StaysSubscribed why;
  if (SuspensionRefused(&why)) {
    NoteCuptiStaysSubscribed(why);
    return false;
  }
  std::string how;
  {
    // Marked first, so that the status stays active while it stops.
    std::lock_guard<std::mutex> lock(DecisionMutex());
    s.suspended = true;
  }
  if (!StopCollection(/*allow_finalize=*/true, &how)) {
    s.suspended = false;
    return false;
  }
  NoteSuspension(policy, how);
  return true;
}

void NoteCuptiStaysSubscribed(StaysSubscribed why) {
  if (InForkChild() || !S().active.load()) return;
  // Asked again at every step's end: said (and counted) once a reason.
  static std::atomic<uint32_t> said{0};
  const int index = static_cast<int>(why);
  const uint32_t bit = 1u << index;
  if ((said.fetch_or(bit) & bit) != 0) return;
  ReportProblem(std::string("stays subscribed: ") + kStaysText[index],
                std::string("CUPTI stayed subscribed between capture windows: ") + kStaysText[index]);
}

bool ResumeCuptiForWindow() {
  State& s = S();
  if (!s.suspended.load()) return s.active.load();
  if (InForkChild() || getpid() != s.owner_pid) return false;
  {
    std::lock_guard<std::mutex> lock(DecisionMutex());
    if (!s.suspended.exchange(false)) return s.active.load();
    if (!LaunchMode() && !s.wanted.load()) return false;  // detached meanwhile
  }
  const bool started =
      StartCollection(/*wait=*/true, /*cuda_running=*/true, /*resuming=*/true);
  if (started && !LaunchMode() && !s.wanted.load()) {
    // A detach came between the decision and the start.
    std::string how;
    if (StopCollection(/*allow_finalize=*/true, &how)) Disable("stopped at detach: " + how);
    return false;
  }
  return started;
}

void FlushCuptiActivity() {
  State& s = S();
  if (InForkChild() || !s.active.load()) return;
  FlushAndDrain(std::chrono::duration_cast<std::chrono::milliseconds>(kExitDrainTimeout));
}

bool CuptiActivityActive() { return S().active.load() && !InForkChild(); }
uint64_t CuptiProblemCount() { return S().problems.load(); }

}  // namespace gpuos_shim

// Interposes libcupti's cuptiSubscribe for the rest of the process (the
// shim is preloaded): a later CUPTI client makes us step aside first.  Our
// own calls go through the function table of cupti_loader, not through here.
// The real function is found through the library cupti_loader resolves (the
// copy the framework loaded, e.g. PyTorch's): that copy sits in a
// dlopen()ed local scope, where RTLD_NEXT does not look.
extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  gpuos_shim::StepAsideForAnotherClient();
  static SubscribeFn next = [] {
    if (void* fn = dlsym(RTLD_NEXT, "cuptiSubscribe")) return reinterpret_cast<SubscribeFn>(fn);
    gpuos_shim::CuptiLoadResult loaded = gpuos_shim::LoadCupti();
    return loaded.api ? loaded.api->Subscribe : nullptr;
  }();
  if (next == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  CUptiResult result = next(subscriber, callback, userdata);
  if (result != CUPTI_SUCCESS) {
    gpuos_shim::ReportProblem("other client's cuptiSubscribe",
                              "the other CUPTI client's cuptiSubscribe still failed: " +
                                  std::to_string(static_cast<int>(result)));
  }
  return result;
}

extern "C" int InitializeInjection(void) {
  static std::atomic<bool> started{false};
  if (!started.exchange(true)) gpuos_shim::OnCudaInjection();
  return 1;
}
