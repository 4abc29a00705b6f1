// The parser thread: turns the buffers CUPTI filled into events for the
// event channel, drains the API call rings, and pulls completed records out
// of CUPTI periodically; see cupti_parser.h.
#include "cupti_parser.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cupti_activity_api.h"
#include "cupti_api_callbacks.h"
#include "cupti_record_encoder.h"
#include "event_channel.h"

namespace gpuos_shim {
namespace {

// How often completed records are pulled out of CUPTI, so that a long
// job's trace grows while it runs (cuptiActivityFlushPeriod only returns
// full buffers, which a slow job may take minutes to fill).
constexpr auto kFlushPeriod = std::chrono::milliseconds(500);
// The parser empties the API call rings (cupti_api_callbacks.h) this often.
constexpr auto kRingDrainPeriod = std::chrono::milliseconds(10);
// Bounds the demangled-name cache; PyTorch jobs have a few thousand kernels.
constexpr size_t kMaxCachedKernelNames = 50000;

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

// See State::parser_may_call_cupti.
bool ParserEnterCupti() {
  State& s = S();
  s.parser_in_cupti = true;
  if (s.parser_may_call_cupti.load()) return true;
  s.parser_in_cupti = false;
  return false;
}
void ParserLeaveCupti() { S().parser_in_cupti = false; }

RecordEncodeContext ApiNamingContext() {
  State& s = S();
  RecordEncodeContext context;
  context.pid = CurrentPid();
  context.api_name = [&s](bool driver, uint32_t cbid) -> std::string_view {
    const std::vector<std::string>& names = driver ? s.driver_names : s.runtime_names;
    return cbid < names.size() ? std::string_view(names[cbid]) : std::string_view();
  };
  return context;
}

// Sleeps until there is work (or, while collecting, the next flush or ring
// drain is due); takes the buffers queued and the flush request.
std::deque<CompletedBuffer> WaitForWork(Clock::time_point* next_flush, bool* flush_events) {
  State& s = S();
  std::deque<CompletedBuffer> batch;
  std::unique_lock<std::mutex> lock(s.queue_mu);
  auto work = [&s] { return !s.completed.empty() || s.flush_events_requested; };
  if (s.parser_may_call_cupti.load()) {
    const Clock::time_point wake =
        s.api_by_callbacks.load() ? std::min(*next_flush, Clock::now() + kRingDrainPeriod)
                                  : *next_flush;
    s.queue_cv.wait_until(lock, wake, work);
  } else {
    // Collection is off (detached): asleep until buffers come or a
    // start lets us flush again.
    s.queue_cv.wait(lock, [&] { return work() || s.parser_may_call_cupti.load(); });
    *next_flush = Clock::now() + kFlushPeriod;
  }
  batch.swap(s.completed);
  *flush_events = std::exchange(s.flush_events_requested, false);
  return batch;
}

// Parses and returns a batch of buffers, then wakes a flush waiting for it.
void ParseBatch(const std::deque<CompletedBuffer>& batch, RecordEncodeContext& context,
                std::string* encoded) {
  State& s = S();
  if (batch.empty()) return;
  ClockConverter clock;
  context.clock = nullptr;
  if (s.timestamps.mapped()) {
    // A reading newer than every record in the batch, so that none of
    // them is extrapolated.
    s.timestamps.TakeReading();
    clock = s.timestamps.Snapshot();
    context.clock = &clock;
  }
  for (const CompletedBuffer& buffer : batch) {
    ParseBuffer(buffer, context, encoded);
    ReturnBuffer(buffer.data);
  }
  context.clock = nullptr;
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

void ParserLoop() {
  State& s = S();
  KernelNameCache kernel_names;
  RecordEncodeContext context = ApiNamingContext();
  context.kernel_name = [&kernel_names](const char* mangled) { return kernel_names.Get(mangled); };

  std::string encoded;
  Clock::time_point next_flush = Clock::now() + kFlushPeriod;
  for (;;) {
    bool flush_events = false;
    const std::deque<CompletedBuffer> batch = WaitForWork(&next_flush, &flush_events);
    ParseBatch(batch, context, &encoded);
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

}  // namespace

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

void KeepParserOutOfCupti() {
  State& s = S();
  s.parser_may_call_cupti = false;
  for (int i = 0; i < 2000 && s.parser_in_cupti.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void LetParserIntoCupti() {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.parser_may_call_cupti = true;
  }
  s.queue_cv.notify_all();
}

void DrainTimedApiCalls() {
  ApiCallRings* rings = S().api_rings.load(std::memory_order_acquire);
  if (rings == nullptr) return;
  const RecordEncodeContext context = ApiNamingContext();
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

}  // namespace gpuos_shim
