// How a report names and frames a recording: its time span, command line,
// wall-clock start, a process's exit status, a process's threads added up,
// and for an attached recording its attach window and how the CUDA side of
// each process was recorded.  Shared by the text, JSON and HTML reports, so
// they all say the same.
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

// ---- Attached recordings (gpuos-trace --pid / --gpu-procs) ----

// The header says the recording attached to running processes.
bool IsAttached(const v1::TraceHeader& header);
bool IsAttachTarget(const v1::TraceHeader& header, uint32_t pid);

// The attach window: header.attach.start_ns to trailer.attach_end_ns, or to
// the trace's end when the recording did not end cleanly.
uint64_t AttachStartNs(const OsSummary& s);
uint64_t AttachEndNs(const OsSummary& s);

// "pid 4242 (python3 train.py) from 2026-11-22 01:23:41 UTC for 30.0 s
// (--duration 30s)"; "pids 4242 (python3 train.py), 4250 (python3)" for
// several targets.  Safe to print.
std::string AttachText(const OsSummary& s);

// One line per process of the trailer's cuda_attach: "pid 4242: injected;
// stopped 3.1 ms; 51230 kernels; <detail>".  Safe to print.
std::vector<std::string> CudaAttachLines(const OsSummary& s);

// What a report says when a trace has CUDA API calls from eBPF uprobes and
// no GPU records, and so no GPU-side timing.
inline constexpr char kCpuSideOnlyText[] =
    "CPU side only: the CUDA driver calls were recorded by eBPF uprobes on libcuda, without GPU records; "
    "GPU-side timing (kernels, copies, GPU idle) needs the CUDA shim in the process: injection at attach, or "
    "starting the job under gpuos-trace --prepare";

}  // namespace gpuos
