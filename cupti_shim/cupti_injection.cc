// CUPTI activity collection: injection entry point, starting and stopping
// (launch, attach, detach, stepping aside), handing CUPTI buffers from the
// pool (cupti_buffer_pool.h), parser thread, flushing at context teardown
// and exit, fork safety (see the header).  Follows Kineto's
// CuptiActivityApi habits: CUPTI's buffer callbacks only take or queue a
// buffer under a short lock, records are parsed on our own thread, and no
// lock of ours is ever held while calling into CUPTI, which may call back
// into us from inside (an ABBA deadlock otherwise).
#include "cupti_injection.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attach_control.h"
#include "capture_control.h"
#include "cupti_api_call_rings.h"
#include "cupti_buffer_pool.h"
#include "cupti_loader.h"
#include "cupti_record_encoder.h"
#include "cupti_timestamps.h"
#include "event_channel.h"
#include "import_redirect.h"

namespace gpuos_shim {
namespace {

using Clock = std::chrono::steady_clock;

// How often completed records are pulled out of CUPTI, so that a long
// job's trace grows while it runs (cuptiActivityFlushPeriod only returns
// full buffers, which a slow job may take minutes to fill).
constexpr auto kFlushPeriod = std::chrono::milliseconds(500);
// API calls timed by callbacks: each thread's ring holds this many (40
// bytes each), which at 400,000 calls/s on one thread (a launch loop's
// runtime and driver calls) lasts 80 ms; the parser empties the rings every
// kRingDrainPeriod.
constexpr size_t kApiRingRecords = size_t{1} << 15;
constexpr auto kRingDrainPeriod = std::chrono::milliseconds(10);
constexpr auto kExitDrainTimeout = std::chrono::seconds(5);
// How long a stop waits for cuptiFinalize in an API's exit callback, and
// for a start in progress on another thread.
constexpr auto kFinalizeTimeout = std::chrono::seconds(5);
constexpr auto kStartWaitTimeout = std::chrono::seconds(10);
// CUPTI API version of CUDA 12.6: cuptiFinalize with CUDA graphs crashed
// before it (pytorch/pytorch#112507, fixed in 12.6 per pytorch#146604).
constexpr uint32_t kMinCuptiVersionToFinalize = 24;

// Every kind the shim may enable; a stop disables them all.
constexpr CUpti_ActivityKind kAllKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,            CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};

// Where collection stands.  Only a thread that moved it out of kOff (or kOn)
// may move it on; the others wait or give up.
enum Phase : int { kOff, kStarting, kOn, kStopping };
// The cuptiFinalize handshake between a stop and the API callback.
enum FinalizeState : int { kNoFinalize, kFinalizeRequested, kFinalizing, kFinalized };
// Bounds the demangled-name cache; PyTorch jobs have a few thousand kernels.
constexpr size_t kMaxCachedKernelNames = 50000;
constexpr size_t kMaxProblemsInStatus = 4;

struct CompletedBuffer {
  uint8_t* data;
  size_t valid_bytes;
};

struct State {
  const CuptiApi* api = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  pid_t owner_pid = 0;
  std::atomic<int> phase{kOff};
  // Records are being collected (phase kOn and not yet stopping).
  std::atomic<bool> active{false};
  // Set in a fork child: CUPTI's state and our parser thread belong to the
  // parent, and its locks may have been held mid-fork.
  std::atomic<bool> in_fork_child{false};
  // Attach: an agent wants collection (set by attach, cleared by detach).
  std::atomic<bool> wanted{false};
  // InitializeInjection ran: the process is inside or past cuInit.
  std::atomic<bool> cuda_up{false};
  // Attached before cuInit: InitializeInjection is to start collection.
  std::atomic<bool> awaiting_cuinit{false};
  // The parser may call CUPTI on its own (periodic flush, drop counts);
  // parser_in_cupti lets a stop or exit wait out a call it began (set, then
  // check, on both sides, so one of them sees the other).
  std::atomic<bool> parser_may_call_cupti{false};
  std::atomic<bool> parser_in_cupti{false};
  // API records are enabled per call (cuptiActivityEnableRuntimeApi...).
  bool api_filtered_in_cupti = false;
  // API calls are timed by our callbacks into api_rings (created once per
  // process, never destroyed; published before api_by_callbacks is set),
  // not by CUPTI's RUNTIME/DRIVER records.
  std::atomic<bool> api_by_callbacks{false};
  std::atomic<ApiCallRings*> api_rings{nullptr};
  std::atomic<int> finalize_state{kNoFinalize};
  std::atomic<int> finalize_result{CUPTI_SUCCESS};
  // Done once per process, by whichever start comes first (the phase
  // handshake serializes starts).
  bool tables_built = false;
  bool parser_started = false;
  bool atexit_registered = false;
  std::thread::id parser_thread;

  // Buffers CUPTI may fill.
  ActivityBufferPool buffers;
  std::atomic<uint64_t> refused_reported{0};

  // Buffers CUPTI has filled, waiting for the parser.
  std::mutex queue_mu;
  std::condition_variable queue_cv;    // wakes the parser
  std::condition_variable drained_cv;  // wakes FlushCuptiActivity
  std::deque<CompletedBuffer> completed;
  uint64_t enqueued_buffers = 0;
  uint64_t parsed_buffers = 0;
  bool flush_events_requested = false;

  // CUPTI's clock and its mapping onto CLOCK_MONOTONIC.
  CuptiTimestamps timestamps;

  // Per API domain, indexed by cbid; written once during initialisation.
  std::vector<std::string> runtime_names, driver_names;
  std::vector<bool> runtime_traced, driver_traced;

  // cupti_status is base_status followed by the first problems met.
  std::mutex problem_mu;
  std::string base_status;
  std::string problem_text;
  std::vector<std::string> problem_kinds;
  std::atomic<uint64_t> problems{0};
  bool debug = false;

  // Capture windows (capture_control.h): the device kinds this collection
  // enabled, switched off outside windows.  device_mu serializes the
  // switching; CUPTI's callbacks never take it.
  std::mutex device_mu;
  std::vector<CUpti_ActivityKind> device_kinds;
  bool device_on = false;
};

// Never destroyed: CUPTI and our thread may still use it while static
// destructors run at exit.
State& S() {
  static State* state = new State();
  return *state;
}

bool InForkChild() { return S().in_fork_child.load(std::memory_order_relaxed); }

// Counts a problem; the first of each kind is logged (debug only) and
// named in cupti_status.
void ReportProblem(const std::string& kind, const std::string& detail) {
  State& s = S();
  s.problems.fetch_add(1, std::memory_order_relaxed);
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    for (const std::string& seen : s.problem_kinds) {
      if (seen == kind) return;
    }
    s.problem_kinds.push_back(kind);
    if (s.debug) fprintf(stderr, "gpuos-shim: %s\n", detail.c_str());
    if (s.problem_kinds.size() > kMaxProblemsInStatus) return;
    s.problem_text += "; " + detail;
    status = s.base_status + s.problem_text;
  }
  SetCuptiStatus(s.active.load(), status);
}

// Checks a CUPTI result; never called with one of our locks held.
bool CuptiOk(const char* call, CUptiResult result) {
  if (result == CUPTI_SUCCESS) return true;
  ReportProblem(call, std::string(call) + " failed: " + CuptiResultName(S().api, result));
  return false;
}

// Steps aside: CUPTI stays off and the job carries on.
void Disable(const std::string& why) {
  State& s = S();
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status = why;
    status = s.base_status + s.problem_text;
    if (s.debug) fprintf(stderr, "gpuos-shim: %s\n", why.c_str());
  }
  s.active = false;
  SetCuptiStatus(false, status);
}

// ---- CUPTI callbacks: short, and never call CUPTI --------------------------

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  if (InForkChild()) return;
  // No buffer (pool exhausted): CUPTI drops records and counts them
  // (cuptiActivityGetNumDroppedRecords).
  ActivityBufferPool& pool = S().buffers;
  *buffer = pool.Take();
  if (*buffer != nullptr) *size = pool.buffer_bytes();
}

void CUPTIAPI BufferCompleted(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                              size_t /*size*/, size_t valid_bytes) {
  if (buffer == nullptr || InForkChild()) return;
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.completed.push_back({buffer, valid_bytes});
    ++s.enqueued_buffers;
  }
  s.queue_cv.notify_one();
}

// ---- Parser thread ----------------------------------------------------------

void ReturnBuffer(uint8_t* buffer) { S().buffers.Return(buffer); }

// Demangling every launch of the same kernel again would cost more than all
// the rest of the parsing; CUPTI shares one name string per kernel.
class KernelNameCache {
 public:
  std::string Get(const char* mangled) {
    if (mangled == nullptr) return "";
    auto it = names_.find(mangled);
    if (it != names_.end() && it->second.first == mangled) return it->second.second;
    if (names_.size() >= kMaxCachedKernelNames) names_.clear();
    std::string demangled = DemangleKernelName(mangled);
    names_[mangled] = {mangled, demangled};
    return demangled;
  }

 private:
  // Keyed by address, checked by content: a module unloaded and another
  // loaded may reuse an address for a different name.
  std::unordered_map<const char*, std::pair<std::string, std::string>> names_;
};

bool IsTracedApi(const State& s, bool driver, uint32_t cbid) {
  const std::vector<bool>& traced = driver ? s.driver_traced : s.runtime_traced;
  return cbid < traced.size() && traced[cbid];
}

void ParseBuffer(const CompletedBuffer& buffer, const RecordEncodeContext& context,
                 std::string* encoded) {
  State& s = S();
  if (buffer.valid_bytes > 0) {
    CUpti_Activity* record = nullptr;
    for (;;) {
      CUptiResult result = s.api->ActivityGetNextRecord(buffer.data, buffer.valid_bytes, &record);
      if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end
      if (result != CUPTI_SUCCESS) {
        // An incomplete or unknown record: the rest of this buffer cannot
        // be walked.
        CuptiOk("cuptiActivityGetNextRecord", result);
        break;
      }
      if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
          record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        if (!IsTracedApi(s, record->kind == CUPTI_ACTIVITY_KIND_DRIVER, api->cbid)) continue;
      }
      switch (EncodeActivityRecord(record, context, encoded)) {
        case RecordEncodeOutcome::kEncoded:
          SubmitEvent(std::move(*encoded));
          encoded->clear();
          break;
        case RecordEncodeOutcome::kNoTimestamps:
          ReportProblem("no timestamps",
                        "CUPTI could not time some GPU activity (records without timestamps "
                        "were left out)");
          break;
        case RecordEncodeOutcome::kIgnoredKind:
          break;
      }
    }
  }
}

// Passes on what CUPTI dropped (it resets its count on each read), and
// says so once when it was our pool that ran dry.
void CollectDrops() {
  State& s = S();
  size_t dropped = 0;
  if (CuptiOk("cuptiActivityGetNumDroppedRecords",
              s.api->ActivityGetNumDroppedRecords(nullptr, 0, &dropped)) &&
      dropped > 0) {
    AddCuptiDroppedRecords(dropped);
  }
  const uint64_t refused = s.buffers.refused();
  if (s.refused_reported.exchange(refused) != refused) {
    ReportProblem("pool exhausted",
                  "CUPTI buffer pool exhausted (64 x 8 MiB): the parser fell behind and "
                  "CUPTI dropped records");
  }
}

// See State::parser_may_call_cupti.
bool ParserEnterCupti() {
  State& s = S();
  s.parser_in_cupti = true;
  if (s.parser_may_call_cupti.load()) return true;
  s.parser_in_cupti = false;
  return false;
}
void ParserLeaveCupti() { S().parser_in_cupti = false; }

// Stops the parser's own CUPTI calls and waits out one in progress.
void KeepParserOutOfCupti() {
  State& s = S();
  s.parser_may_call_cupti = false;
  for (int i = 0; i < 2000 && s.parser_in_cupti.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// API calls timed by callbacks -> events.  Called by the parser every
// kRingDrainPeriod and by a flush (ApiCallRings serializes the two).
void DrainTimedApiCalls() {
  State& s = S();
  ApiCallRings* rings = s.api_rings.load(std::memory_order_acquire);
  if (rings == nullptr) return;
  RecordEncodeContext context;
  context.pid = static_cast<uint32_t>(getpid());
  context.api_name = [&s](bool driver, uint32_t cbid) -> std::string_view {
    const std::vector<std::string>& names = driver ? s.driver_names : s.runtime_names;
    return cbid < names.size() ? std::string_view(names[cbid]) : std::string_view();
  };
  std::string encoded;
  rings->Drain([&](const TimedApiCall& call) {
    if (EncodeTimedApiCall(call, context, &encoded) == RecordEncodeOutcome::kEncoded) {
      SubmitEvent(std::move(encoded));
    }
    encoded.clear();
  });
  const uint64_t dropped = rings->TakeDropped();
  if (dropped > 0) {
    AddShimDroppedEvents(dropped);
    ReportProblem("API call ring full",
                  "a thread made CUDA API calls faster than the shim's parser took them: some "
                  "API call events were dropped (counted)");
  }
}

void ParserLoop() {
  State& s = S();
  KernelNameCache kernel_names;
  RecordEncodeContext context;
  context.pid = static_cast<uint32_t>(getpid());
  context.api_name = [&s](bool driver, uint32_t cbid) -> std::string_view {
    const std::vector<std::string>& names = driver ? s.driver_names : s.runtime_names;
    return cbid < names.size() ? std::string_view(names[cbid]) : std::string_view();
  };
  context.kernel_name = [&kernel_names](const char* mangled) { return kernel_names.Get(mangled); };

  std::string encoded;
  Clock::time_point next_flush = Clock::now() + kFlushPeriod;
  for (;;) {
    std::deque<CompletedBuffer> batch;
    bool flush_events = false;
    {
      std::unique_lock<std::mutex> lock(s.queue_mu);
      auto work = [&s] { return !s.completed.empty() || s.flush_events_requested; };
      if (s.parser_may_call_cupti.load()) {
        const Clock::time_point wake =
            s.api_by_callbacks.load() ? std::min(next_flush, Clock::now() + kRingDrainPeriod)
                                      : next_flush;
        s.queue_cv.wait_until(lock, wake, work);
      } else {
        // Collection is off (detached): asleep until buffers come or a
        // start lets us flush again.
        s.queue_cv.wait(lock, [&] { return work() || s.parser_may_call_cupti.load(); });
        next_flush = Clock::now() + kFlushPeriod;
      }
      batch.swap(s.completed);
      flush_events = std::exchange(s.flush_events_requested, false);
    }
    ClockConverter clock;
    context.clock = nullptr;
    if (!batch.empty() && s.timestamps.mapped()) {
      // A reading newer than every record in the batch, so that none of
      // them is extrapolated.
      s.timestamps.TakeReading();
      clock = s.timestamps.Snapshot();
      context.clock = &clock;
    }
    for (const CompletedBuffer& buffer : batch) {
      ParseBuffer(buffer, context, &encoded);
      ReturnBuffer(buffer.data);
    }
    if (!batch.empty()) {
      if (ParserEnterCupti()) {
        CollectDrops();
        ParserLeaveCupti();
      }
      {
        std::lock_guard<std::mutex> lock(s.queue_mu);
        s.parsed_buffers += batch.size();
      }
      s.drained_cv.notify_all();
    }
    DrainTimedApiCalls();
    if (flush_events) FlushEvents();

    if (Clock::now() >= next_flush) {
      if (ParserEnterCupti()) {
        CollectDrops();
        // Hands over buffers whose records are all complete, full or not.
        CuptiOk("cuptiActivityFlushAll", s.api->ActivityFlushAll(0));
        ParserLeaveCupti();
      }
      next_flush = Clock::now() + kFlushPeriod;
    }
  }
}

// Our thread must not take the job's signals (Python expects SIGINT on its
// main thread, and a handler running here could deadlock on our locks).
void StartParserThread() {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  std::thread parser([] {
    pthread_setname_np(pthread_self(), "gpuos-cupti");
    ParserLoop();
  });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  S().parser_thread = parser.get_id();
  // Never joined: it lives until the process ends, and a joinable
  // std::thread destroyed at exit would call std::terminate.
  parser.detach();
}

// ---- Flushing -----------------------------------------------------------

// Asks CUPTI for what it has and has the parser flush the channel once it
// has turned that into events.  Does not wait: it runs on the job's thread,
// inside CUDA calls.
void RequestFlushFromCallback() {
  State& s = S();
  CuptiOk("cuptiActivityFlushAll", s.api->ActivityFlushAll(0));
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.flush_events_requested = true;
  }
  s.queue_cv.notify_one();
}

// Returns whether the parser took everything in time.
bool FlushAndDrain(std::chrono::milliseconds timeout) {
  State& s = S();
  bool drained = true;
  // Delivers every buffer through BufferCompleted before it returns.
  CuptiOk("cuptiActivityFlushAll", s.api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (std::this_thread::get_id() != s.parser_thread) {
    std::unique_lock<std::mutex> lock(s.queue_mu);
    const uint64_t target = s.enqueued_buffers;
    drained =
        s.drained_cv.wait_for(lock, timeout, [&s, target] { return s.parsed_buffers >= target; });
    lock.unlock();
    if (!drained) {
      ReportProblem("drain timeout",
                    "the CUPTI parser did not finish within the flush timeout; the last "
                    "CUDA activity may be missing");
    }
  }
  DrainTimedApiCalls();
  CollectDrops();
  FlushEvents();
  return drained;
}

void AtExit() {
  State& s = S();
  if (InForkChild() || getpid() != s.owner_pid || !s.active.load()) return;
  // libcupti's own teardown follows this handler: the parser must not be
  // inside CUPTI then.
  KeepParserOutOfCupti();
  FlushAndDrain(kExitDrainTimeout);
}

// ---- Detaching CUPTI --------------------------------------------------------

// The driver's functions as the process has them (never loading libcuda
// ourselves): whether CUDA is initialized, and a cheap API call of our own.
struct Driver {
  bool loaded = false;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
};

Driver ProcessDriver() {
  Driver driver;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    dlerror();
    return driver;
  }
  // The handle is kept: libcuda is never unloaded from a process anyway.
  driver.loaded = true;
  driver.CtxGetCurrent = reinterpret_cast<CUresult (*)(CUcontext*)>(dlsym(handle, "cuCtxGetCurrent"));
  return driver;
}

// Before cuInit every driver call but a few answers NOT_INITIALIZED, and
// asking does not initialize anything; after it, cuCtxGetCurrent succeeds
// (with no context, on a thread that has none).
bool CudaInitialized(const Driver& driver) {
  if (driver.CtxGetCurrent == nullptr) return false;
  CUcontext context = nullptr;
  // (CUDA's stub library answers CUDA_ERROR_STUB_LIBRARY to everything.)
  return driver.CtxGetCurrent(&context) == CUDA_SUCCESS;
}

// Runs in the exit callsite of a CUDA API call, where CUPTI's documentation
// (cupti_activity.h, cuptiFinalize) asks for cuptiFinalize; elsewhere it
// races with other threads inside CUPTI (Kineto saw crashes, kineto#686).
// Our subscription goes first, as Kineto does it (kineto#739).
void FinalizeInCallback() {
  State& s = S();
  int expected = kFinalizeRequested;
  if (!s.finalize_state.compare_exchange_strong(expected, kFinalizing)) return;
  s.api->Unsubscribe(s.subscriber);
  s.finalize_result = s.api->Finalize();
  s.finalize_state = kFinalized;
}

// Detaches CUPTI from the process (every kind already disabled, every
// buffer drained).  Returns false, with the reason, where it did not: then
// the caller unsubscribes, and CUPTI stays initialized, idle.
bool FinalizeCupti(std::string* why_not) {
  State& s = S();
  const CuptiApi& api = *s.api;
  const char* setting = getenv("GPUOS_CUPTI_FINALIZE");
  if (setting != nullptr && std::string(setting) == "0") {
    *why_not = "GPUOS_CUPTI_FINALIZE=0";
    return false;
  }
  if (api.Finalize == nullptr || api.EnableDomain == nullptr) {
    *why_not = "this CUPTI lacks cuptiFinalize";
    return false;
  }
  if (api.version < kMinCuptiVersionToFinalize) {
    *why_not = "CUPTI " + std::to_string(api.version) +
               " predates CUDA 12.6, before which cuptiFinalize could crash CUDA graphs";
    return false;
  }
  const Driver driver = ProcessDriver();
  if (!CudaInitialized(driver)) {
    *why_not = "CUDA was never initialized";
    return false;
  }
  // Every API call of every thread now reaches OnCuptiCallback, until one
  // of them has finalized: our own call below, normally.
  if (!CuptiOk("cuptiEnableDomain(RUNTIME_API)",
               api.EnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)) ||
      !CuptiOk("cuptiEnableDomain(DRIVER_API)",
               api.EnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API))) {
    api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    *why_not = "cuptiEnableDomain failed";
    return false;
  }
  s.finalize_state = kFinalizeRequested;
  const Clock::time_point deadline = Clock::now() + kFinalizeTimeout;
  Clock::time_point next_call = Clock::now();
  while (s.finalize_state.load() != kFinalized && Clock::now() < deadline) {
    if (s.finalize_state.load() == kFinalizeRequested && Clock::now() >= next_call) {
      CUcontext context = nullptr;
      driver.CtxGetCurrent(&context);
      next_call = Clock::now() + std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (s.finalize_state.load() != kFinalized) {
    int expected = kFinalizeRequested;
    if (s.finalize_state.compare_exchange_strong(expected, kNoFinalize)) {
      api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
      api.EnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
      *why_not = "no CUDA API callback came to call cuptiFinalize in";
      return false;
    }
    // A callback is inside cuptiFinalize now; it unsubscribed us already.
    *why_not = "cuptiFinalize did not return within 5 s";
    return true;
  }
  s.finalize_state = kNoFinalize;
  if (s.finalize_result.load() != CUPTI_SUCCESS) {
    *why_not = "cuptiFinalize failed: " +
               CuptiResultName(&api, static_cast<CUptiResult>(s.finalize_result.load()));
  }
  return true;
}

// Entry: the start time goes where CUPTI keeps it for the exit (the top
// bit marks it ours: a call already under way when the callbacks were
// switched on has no entry).  Exit: one record into the thread's ring.
constexpr uint64_t kEnteredMark = uint64_t{1} << 63;
void TimeApiCall(State& s, bool driver, CUpti_CallbackId cbid, const CUpti_CallbackData& call) {
  if (!IsTracedApi(s, driver, cbid)) return;
  if (call.callbackSite == CUPTI_API_ENTER) {
    *call.correlationData = MonotonicNs() | kEnteredMark;
    return;
  }
  const uint64_t entered = *call.correlationData;
  const uint64_t end = MonotonicNs();
  const uint64_t start = entered & ~kEnteredMark;
  if ((entered & kEnteredMark) == 0 || start > end) return;
  TimedApiCall timed;
  timed.start_ns = start;
  timed.end_ns = end;
  timed.correlation_id = call.correlationId;
  timed.cbid = cbid;
  timed.tid = CurrentTid();
  timed.return_value =
      call.functionReturnValue != nullptr ? *static_cast<const int*>(call.functionReturnValue) : 0;
  timed.driver = driver;
  s.api_rings.load(std::memory_order_acquire)->Record(timed);
}

void CUPTIAPI OnCuptiCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid, const void* data) {
  State& s = S();
  if ((domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) &&
      s.finalize_state.load(std::memory_order_relaxed) == kFinalizeRequested) {
    if (static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT) {
      FinalizeInCallback();
    }
    return;
  }
  if (InForkChild() || !s.active.load(std::memory_order_relaxed)) return;
  if ((domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) &&
      s.api_by_callbacks.load(std::memory_order_relaxed)) {
    TimeApiCall(s, domain == CUPTI_CB_DOMAIN_DRIVER_API, cbid,
                *static_cast<const CUpti_CallbackData*>(data));
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    RequestFlushFromCallback();
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020 &&
             static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_ENTER) {
    RequestFlushFromCallback();
  }
}

// Our buffers' memory goes back once CUPTI has returned them all.
void FreePooledBuffers() { S().buffers.FreeIdle(); }

// Before any kind is enabled, so before CUPTI asks for a buffer: buffers
// handed over already zero (cupti_buffer_pool.h), unless
// GPUOS_CUPTI_ZEROED_BUFFERS=0 (for measuring what it saves).
void ConfigureActivityBuffers(const CuptiApi& api) {
  const char* env = getenv("GPUOS_CUPTI_ZEROED_BUFFERS");
  bool zeroed = false;  // otherwise CUPTI zeroes each buffer itself (its default)
  if ((env == nullptr || strcmp(env, "0") != 0) && api.ActivitySetAttribute != nullptr) {
    uint8_t one = 1;
    size_t size = sizeof(one);
    zeroed = CuptiOk("cuptiActivitySetAttribute(ZEROED_OUT_ACTIVITY_BUFFER)",
                     api.ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                              &size, &one));
  }
  S().buffers.SetZeroed(zeroed);
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
    s.device_on = false;
  }
  KeepParserOutOfCupti();
  const CuptiApi& api = *s.api;
  for (CUpti_ActivityKind kind : kAllKinds) api.ActivityDisable(kind);
  if (s.api_filtered_in_cupti) {
    for (uint32_t cbid = 0; cbid < s.runtime_traced.size(); ++cbid) {
      if (s.runtime_traced[cbid]) api.ActivityEnableRuntimeApi(cbid, 0);
    }
    for (uint32_t cbid = 0; cbid < s.driver_traced.size(); ++cbid) {
      if (s.driver_traced[cbid]) api.ActivityEnableDriverApi(cbid, 0);
    }
  }
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
void BeforeFork() {
  S().buffers.LockForFork();
  S().queue_mu.lock();
}
void AfterForkParent() {
  S().queue_mu.unlock();
  S().buffers.UnlockAfterFork();
}
void OnForkChild() {
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
    pthread_atfork(BeforeFork, AfterForkParent, OnForkChild);
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

// ---- Initialisation ---------------------------------------------------------

// Names and the traced allow-list of every callback id of one API domain.
// Probes past our headers' CBID_SIZE so a newer CUPTI's new ids get names.
void BuildApiTable(const CuptiApi& api, bool driver, std::vector<std::string>* names,
                   std::vector<bool>* traced) {
  const CUpti_CallbackDomain domain =
      driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
  const uint32_t known = driver ? static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_SIZE)
                                : static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE);
  const uint32_t size = 2 * known;
  names->assign(size, std::string());
  traced->assign(size, false);
  for (uint32_t cbid = 1; cbid < size; ++cbid) {
    const char* name = nullptr;
    if (api.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    (*names)[cbid] = ApiDisplayName(driver, name);
    (*traced)[cbid] = IsTracedApiName(name);
  }
}

// GPUOS_CUPTI_KINDS (gpuos-trace --cuda-records sets it): a comma list of
// kernel, memcpy, memset, sync, runtime, driver that narrows what is
// recorded, trading detail for overhead; "" records all.  Read once.
const std::string& RequestedKinds() {
  static const std::string kinds = [] {
    const char* env = getenv("GPUOS_CUPTI_KINDS");
    return std::string(env ? env : "");
  }();
  return kinds;
}

bool KindWanted(const char* kind) {
  const std::string& kinds = RequestedKinds();
  if (kinds.empty()) return true;
  std::string needle = kind;
  size_t pos = 0;
  while (pos <= kinds.size()) {
    size_t comma = kinds.find(',', pos);
    if (comma == std::string::npos) comma = kinds.size();
    if (kinds.compare(pos, comma - pos, needle) == 0) return true;
    pos = comma + 1;
  }
  return false;
}

// ", only kernel,memcpy records (...)" when the kinds are narrowed, so a
// trace without API calls says why; else "".
std::string KindsNote() {
  if (RequestedKinds().empty()) return "";
  return ", only " + RequestedKinds() + " records (--cuda-records, GPUOS_CUPTI_KINDS)";
}

// Turns on our entry/exit callbacks for every traced call id of the wanted
// domains.  All or nothing: on a failure the ones turned on are turned off
// again, and the caller falls back to activity records.
bool EnableApiCallbacks(const CuptiApi& api, bool want_runtime, bool want_driver) {
  State& s = S();
  ApiCallRings* rings = s.api_rings.load(std::memory_order_acquire);
  if (rings == nullptr) {
    rings = new (std::nothrow) ApiCallRings(kApiRingRecords);
    if (rings == nullptr) return false;
    s.api_rings.store(rings, std::memory_order_release);
  } else {
    // A callback that was already running when the last collection
    // stopped may have written a record after its final drain: lost, and
    // counted so.
    AddShimDroppedEvents(rings->Drain([](const TimedApiCall&) {}));
  }
  std::vector<std::pair<CUpti_CallbackDomain, uint32_t>> enabled;
  auto enable_domain = [&](CUpti_CallbackDomain domain, const std::vector<bool>& traced) {
    for (uint32_t cbid = 0; cbid < traced.size(); ++cbid) {
      if (!traced[cbid]) continue;
      if (api.EnableCallback(1, s.subscriber, domain, cbid) != CUPTI_SUCCESS) return false;
      enabled.emplace_back(domain, cbid);
    }
    return true;
  };
  s.api_by_callbacks = true;
  if ((!want_runtime || enable_domain(CUPTI_CB_DOMAIN_RUNTIME_API, s.runtime_traced)) &&
      (!want_driver || enable_domain(CUPTI_CB_DOMAIN_DRIVER_API, s.driver_traced))) {
    return true;
  }
  s.api_by_callbacks = false;
  for (const auto& [domain, cbid] : enabled) api.EnableCallback(0, s.subscriber, domain, cbid);
  ReportProblem("API callbacks", "cuptiEnableCallback failed for a traced API call: API calls "
                                 "recorded through activity records instead");
  return false;
}

// Per-call filtering inside CUPTI where it can (records of untraced calls
// are then never written); otherwise every call of the kind is recorded and
// the parser filters.  CUPTI's per-call switches take effect only when set
// before CUDA is initialized (seen on an H200, CUPTI 13.0: set mid-run they
// record nothing), so a start in a running CUDA process (attach) enables
// the whole kinds.
std::string EnableApiRecords(const CuptiApi& api, bool cuda_running) {
  State& s = S();
  s.api_filtered_in_cupti = false;
  const bool want_runtime = KindWanted("runtime");
  const bool want_driver = KindWanted("driver");
  if (!want_runtime && !want_driver) return "no API calls";  // KindsNote() says why
  // GPUOS_CUPTI_API_TIMING=callback: our own entry/exit callbacks instead
  // of CUPTI's RUNTIME/DRIVER records.  Not the default: on an H200 they
  // cost each traced call 120-400 ns more (docs/archive/gpu-results.md, "API
  // calls timed by callbacks").
  const char* timing = getenv("GPUOS_CUPTI_API_TIMING");
  if (timing && std::string(timing) == "callback" &&
      EnableApiCallbacks(api, want_runtime, want_driver)) {
    return "API calls timed by callbacks";
  }
  // GPUOS_CUPTI_API_FILTER=shim enables the whole API kinds and filters in
  // the parser instead (to measure which costs the job less).
  const char* filter = getenv("GPUOS_CUPTI_API_FILTER");
  const bool filter_in_cupti = !(filter && std::string(filter) == "shim");
  if (filter_in_cupti && !cuda_running && api.ActivityEnableRuntimeApi != nullptr &&
      api.ActivityEnableDriverApi != nullptr) {
    bool ok = true;
    for (uint32_t cbid = 0; want_runtime && ok && cbid < s.runtime_traced.size(); ++cbid) {
      if (s.runtime_traced[cbid]) ok = api.ActivityEnableRuntimeApi(cbid, 1) == CUPTI_SUCCESS;
    }
    for (uint32_t cbid = 0; want_driver && ok && cbid < s.driver_traced.size(); ++cbid) {
      if (s.driver_traced[cbid]) ok = api.ActivityEnableDriverApi(cbid, 1) == CUPTI_SUCCESS;
    }
    s.api_filtered_in_cupti = ok;
    if (ok) return "API calls filtered in CUPTI";
  }
  // Enabling the kinds overrides any per-call settings made above.
  const bool runtime = want_runtime && CuptiOk("cuptiActivityEnable(RUNTIME)",
                                               api.ActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  const bool driver = want_driver && CuptiOk("cuptiActivityEnable(DRIVER)",
                                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
  if (!runtime && !driver) return "no API calls";
  return filter_in_cupti && cuda_running
             ? "API calls filtered by the shim (CUDA was running at the start)"
             : "API calls filtered by the shim";
}

// The device kinds BeginCollection enabled (all on now), for capture
// windows to switch.
void RememberDeviceKinds(CUpti_ActivityKind kernel_kind, bool copies, bool memsets, bool syncs) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.device_mu);
  s.device_kinds.clear();
  if (kernel_kind != CUPTI_ACTIVITY_KIND_INVALID) s.device_kinds.push_back(kernel_kind);
  if (copies) {
    s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY2);
  }
  if (memsets) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_MEMSET);
  if (syncs) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  // API records cost the launching thread as much as kernel records
  // (docs/gpu-results.md): outside windows they go too, unless
  // GPUOS_CAPTURE_API_RECORDS=always.  Switched back on mid-run, a kind
  // records every call (CUPTI's per-call switches are set before cuInit
  // only) and the parser keeps the traced ones.  API calls timed by our
  // callbacks stay on.
  const char* api_setting = getenv("GPUOS_CAPTURE_API_RECORDS");
  const bool gate_api = api_setting == nullptr || strcmp(api_setting, "always") != 0;
  if (gate_api && !s.api_by_callbacks.load()) {
    if (KindWanted("runtime")) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (KindWanted("driver")) s.device_kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  s.device_on = true;
}

// Subscribes, registers the timestamp and buffer callbacks, enables the
// kinds; the same whether CUDA starts now (InitializeInjection) or runs
// already (attach).  Called by the one thread that moved the phase to
// kStarting.  Returns whether records are being collected.
bool BeginCollection(bool cuda_running) {
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
  {
    // Each attach reports its own problems.
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.problem_text.clear();
    s.problem_kinds.clear();
  }

  // Subscribing first: if another tool holds CUPTI, nothing global (the
  // timestamp source, buffer callbacks) may be changed under it.
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
  result = api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (result != CUPTI_SUCCESS) {
    api.Unsubscribe(s.subscriber);
    Disable(source + ": cuptiActivityRegisterCallbacks failed: " + CuptiResultName(&api, result) +
            ": CUDA activity not recorded");
    return false;
  }

  ConfigureActivityBuffers(api);
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status = source;
  }
  // API records' tid must be the kernel's thread id, as in the eBPF events.
  CuptiOk("cuptiSetThreadIdType", api.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  if (!s.tables_built) {
    // Read by the parser without a lock: written once, before it starts.
    BuildApiTable(api, /*driver=*/false, &s.runtime_names, &s.runtime_traced);
    BuildApiTable(api, /*driver=*/true, &s.driver_names, &s.driver_traced);
    s.tables_built = true;
  }
  CuptiOk("cuptiEnableCallback(CONTEXT_DESTROY_STARTING)",
          api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                             CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  CuptiOk("cuptiEnableCallback(cudaDeviceReset)",
          api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.parser_may_call_cupti = true;
  }
  s.queue_cv.notify_all();
  if (!s.parser_started) {
    StartParserThread();
    s.parser_started = true;
  }
  s.active = true;

  bool serialised_kernels = false;
  const bool want_kernels = KindWanted("kernel");
  bool kernels = want_kernels &&
                 api.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
  if (want_kernels && !kernels) {
    // Serialises kernels, but is better than no kernels.
    kernels =
        CuptiOk("cuptiActivityEnable(KERNEL)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL));
    serialised_kernels = kernels;
  }
  const bool want_copies = KindWanted("memcpy");
  const bool copies = want_copies && CuptiOk("cuptiActivityEnable(MEMCPY)",
                                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  if (want_copies) {
    CuptiOk("cuptiActivityEnable(MEMCPY2)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2));
  }
  if (KindWanted("memset")) {
    CuptiOk("cuptiActivityEnable(MEMSET)", api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  }
  const bool syncs = KindWanted("sync") &&
                     CuptiOk("cuptiActivityEnable(SYNCHRONIZATION)",
                             api.ActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  if (syncs && api.ActivityEnableAllSyncRecords != nullptr) {
    // Not one record per cudaEventQuery/cudaStreamQuery poll that found the
    // work unfinished (PyTorch polls a lot).
    CuptiOk("cuptiActivityEnableAllSyncRecords", api.ActivityEnableAllSyncRecords(0));
  }
  const std::string api_records = EnableApiRecords(api, cuda_running);
  RememberDeviceKinds(kernels ? (serialised_kernels ? CUPTI_ACTIVITY_KIND_KERNEL
                                                    : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                              : CUPTI_ACTIVITY_KIND_INVALID,
                      want_copies && copies, KindWanted("memset"), syncs);

  if (!kernels && !copies) {
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
    return false;
  }
  std::string status;
  {
    std::lock_guard<std::mutex> lock(s.problem_mu);
    s.base_status =
        source + ", " + api_records + KindsNote() + ", " + s.timestamps.Describe() +
        (serialised_kernels ? ", kernels serialised (no concurrent-kernel tracing)" : "");
    status = s.base_status + s.problem_text;
  }
  SetCuptiStatus(true, status);
  SetDeviceActivityEnabled(CaptureDetailWanted());
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
bool StartCollection(bool wait, bool cuda_running) {
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
  const bool started = BeginCollection(cuda_running);
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

std::string CurrentStatus() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.problem_mu);
  return s.base_status + s.problem_text;
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
  bool was_waiting = false;
  {
    std::lock_guard<std::mutex> lock(DecisionMutex());
    was_waiting = s.awaiting_cuinit.exchange(false);
    s.wanted = false;
  }
  if (InForkChild()) return;
  std::string how;
  if (StopCollection(/*allow_finalize=*/true, &how)) {
    Disable("stopped at detach (" + std::to_string(MonotonicNs()) + " ns CLOCK_MONOTONIC): " + how);
  } else if (was_waiting) {
    Disable("detached before the process initialized CUDA");
  }
}

void FlushCuptiActivity() {
  State& s = S();
  if (InForkChild() || !s.active.load()) return;
  FlushAndDrain(std::chrono::duration_cast<std::chrono::milliseconds>(kExitDrainTimeout));
}

bool CuptiActivityActive() { return S().active.load() && !InForkChild(); }

void SetDeviceActivityEnabled(bool enabled) {
  State& s = S();
  if (InForkChild() || !s.active.load()) return;
  std::lock_guard<std::mutex> lock(s.device_mu);
  if (s.device_kinds.empty() || s.device_on == enabled) return;
  for (CUpti_ActivityKind kind : s.device_kinds) {
    if (enabled) {
      CuptiOk("cuptiActivityEnable (capture window)", s.api->ActivityEnable(kind));
    } else {
      s.api->ActivityDisable(kind);
    }
  }
  s.device_on = enabled;
  // The window's records go to the parser now rather than at the next
  // periodic flush; not forced, so the job's thread does not wait.
  if (!enabled) RequestFlushFromCallback();
}

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
