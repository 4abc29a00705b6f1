// How a report names and frames a recording: its time span, command line,
// wall-clock start, a process's exit status, and a process's threads added
// up.  Shared by the text, JSON and HTML reports, so they all say the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/os_summary.h"

namespace gpuos {

// Monotonic start and end of the recording: the header and trailer clocks
// when present, else the first and last event.
uint64_t TraceStartNs(const OsSummary& s);
uint64_t TraceEndNs(const OsSummary& s);
uint64_t TraceDurationNs(const OsSummary& s);

// Shell-like quoting, so a reader can tell the arguments apart; safe to
// print (see Printable).
std::string CommandLine(const v1::TraceHeader& header);

// "2026-11-22 01:23:41 UTC", or "unknown".
std::string WallClock(uint64_t realtime_ns);

// "exit 0", "exit 3", "SIGKILL", "SIGSEGV (core)"; "-" while it ran on.
std::string ExitText(const ProcessSummary& p);

// Threads added up (counts and times summed, maxima kept).
ThreadSummary SumThreads(const std::vector<ThreadSummary>& threads);

}  // namespace gpuos
