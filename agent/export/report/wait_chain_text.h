// The wakeup chain behind a GPU-idle cause, as the text, HTML and JSON
// reports show it: who ended the driving thread's waits, who woke them,
// and what the threads at the chains' ends were doing meanwhile, e.g.
// "via pin-memory thread 812 "python3" <- data workers 820
// "pt_data_worker_0", 821 ...: the data workers waited for were on-CPU 92%,
// preempted 6% of the wait".
#pragma once

#include <string>
#include <vector>

#include "analysis/step_analysis.h"
#include "export/report/json_writer.h"

namespace gpuos {

// The via rows of `cause` in the measured steps, by hop, then most time
// first.
std::vector<const WaitVia*> ViaOf(const StepAnalysis& a, IdleCause cause);

// "" when the cause has no chain.
std::string WaitChainText(const StepAnalysis& a, IdleCause cause);

// `"via": [{"tid", "pid", "comm", "role", "hop", "last", "ns", "state_ns":
// {...}}, ...]`: hop 0 ended the driving thread's waits, hop 1 woke hop 0...;
// last marks the end of a chain, the thread whose work was waited for.
// as a member of the object being written (at most `max_rows` rows, the
// rest counted in "via_left_out").
void WaitChainJson(const StepAnalysis& a, IdleCause cause, JsonWriter& json, size_t max_rows = 16);

// The job's worker processes as a group, as the OS-cost tables name them:
// "data workers (4 processes)", or "worker processes, not a DataLoader's
// (4)" where the trace tells (StepAnalysis::WorkersAreNotADataLoaders).
std::string WorkerGroupLabel(const StepAnalysis& a);

}  // namespace gpuos
