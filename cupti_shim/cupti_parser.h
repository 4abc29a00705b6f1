// The shim's parser thread (Kineto's habit: records are parsed on a thread
// of our own, never inside CUPTI's callbacks).  It takes the buffers CUPTI
// filled (queued by cupti_activity_api.cc), turns each record into an event
// (cupti_record_encoder.h) for the event channel, drains the API call rings
// of cupti_api_callbacks.cc, and every 500 ms asks CUPTI for the records it
// completed, so that a slow job's trace grows while it runs.  Started once
// per process; it lives until the process ends and sleeps while collection
// is off.
#pragma once

#include "cupti_collection_state.h"

namespace gpuos_shim {

// Starts the parser thread (once per process; the caller keeps count).
void StartParserThread();

// The parser may call CUPTI on its own again (periodic flush, drop counts),
// once collection runs.
void LetParserIntoCupti();

// Stops the parser's own CUPTI calls and waits out one in progress (before
// kinds are disabled, CUPTI torn down or the process exits).
void KeepParserOutOfCupti();

// API calls timed by callbacks -> events.  Called by the parser every 10 ms
// and by a flush (ApiCallRings serializes the two).
void DrainTimedApiCalls();

// Passes on what CUPTI dropped (it resets its count on each read), and
// says so once when it was our pool that ran dry.
void CollectDrops();

}  // namespace gpuos_shim
