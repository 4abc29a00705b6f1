#!/usr/bin/env python3
"""Reads an attached trace (gpuos-trace dump, JSON lines) and the job's own
step log (attach_train.py), and prints one JSON line:
  step time before / during / after the attach window (medians, ms),
  steps in the window, kernels (or uprobe launch calls) per step in it,
  the CUDA attach mode and stopped time.
With --launched DUMP: kernels per step of a launched trace of the same job
(steps from its own log), to compare.

  attach_check.py window TRACE.jsonl STEPS.log
  attach_check.py launched TRACE.jsonl STEPS.log
"""
import json
import statistics
import sys


def load(dump):
    header, trailer, events = {}, {}, []
    for line in open(dump):
        rec = json.loads(line)
        if "header" in rec:
            header = rec["header"]
        elif "trailer" in rec:
            trailer = rec["trailer"]
        elif "event" in rec:
            events.append(rec["event"])
    return header, trailer, events


def steps(path):
    return [int(line.split()[2]) for line in open(path) if line.startswith("step ")]


def per_step(events, ends, lo, hi):
    """Kernels and uprobe launch calls between step ends inside [lo, hi],
    narrowed to where CUDA was recorded: CUPTI (or the probes) start a few
    ms after the window opens and stop a little before it closes, and a
    step half-recorded would count short."""
    seen = [int(e["ts_ns"]) for e in events
            if "gpu_kernel" in e or ("cuda_api" in e and e["cuda_api"].get("from_uprobe"))]
    if seen:
        lo, hi = max(lo, min(seen)), min(hi, max(seen))
    inside = [t for t in ends if lo <= t <= hi]
    if len(inside) < 3:
        return len(inside), 0, 0
    a, b = inside[0], inside[-1]
    n = len(inside) - 1
    kernels = sum(1 for e in events if "gpu_kernel" in e and a < int(e["ts_ns"]) <= b)
    launches = sum(1 for e in events if "cuda_api" in e and e["cuda_api"].get("from_uprobe")
                   and "Launch" in e["cuda_api"].get("name", "") and a < int(e["ts_ns"]) <= b)
    return n, kernels / n, launches / n


def durations(ends, lo, hi):
    d = [(ends[i] - ends[i - 1]) / 1e6 for i in range(1, len(ends)) if lo <= ends[i - 1] and ends[i] <= hi]
    return round(statistics.median(d), 3) if d else None


def main():
    mode, dump, log = sys.argv[1], sys.argv[2], sys.argv[3]
    header, trailer, events = load(dump)
    ends = steps(log)
    if mode == "launched":
        n, kps, _ = per_step(events, ends[10:], 0, 1 << 63)
        print(json.dumps({"steps": n, "kernels_per_step": round(kps, 2)}))
        return
    start = int(header["attach"]["start_ns"])
    end = int(trailer["attach_end_ns"])
    n, kps, lps = per_step(events, ends, start, end)
    cuda = trailer.get("cuda_attach", [{}])
    out = {
        "window_s": round((end - start) / 1e9, 2),
        "step_ms_before": durations(ends[20:], 0, start - 500_000_000),
        "step_ms_during": durations(ends, start + 500_000_000, end),
        "step_ms_after": durations(ends, end + 1_000_000_000, 1 << 63),
        "steps_in_window": n,
        "kernels_per_step": round(kps, 3),
        "uprobe_launches_per_step": round(lps, 3),
        "mode": [c.get("mode") for c in cuda],
        "stopped_ms": [round(int(c.get("stopped_ns", 0)) / 1e6, 2) for c in cuda],
        "detail": [c.get("detail", "")[:160] for c in cuda],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
