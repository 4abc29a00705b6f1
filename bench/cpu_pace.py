"""How fast this CPU runs right now, for benchmarks on a shared host.

Single runs of the same untraced loop scatter by 10-20% from one process to
the next on the GPU machines, more than some of the overheads measured.  So
the timed loop runs in chunks, each after a reading of a fixed amount of CPU
work that no tracer touches (no syscall, no CUDA call): the pace.  A chunk's
time per step divided by the pace next to it is in units of "this CPU's
speed at that moment", and a tracer's overhead can be taken as the ratio of
those instead of raw rates.  That the untraced runs' paced times scatter
less than their raw rates is the check that this works
(bench/summarize_gpu_runs.py judges by paced figures only where it holds);
that the pace readings agree between variants is the check that the tracer
leaves the reference alone.  For the C++ launch loop it works (on an H200
host the untraced runs scattered 8.3% raw and 1.7% paced,
docs/archive/gpu-results.md: "Pacing").  For the PyTorch loops it does not:
in their processes the reference itself ran 2x faster or slower from one
process to the next (with this CRC as with a pure-Python loop) while the
loops did not follow, so the summary judges them by raw rates.
"""
import statistics
import time
import zlib

# The reference work: a CRC over a buffer that stays in the CPU's caches,
# done in C, about 2-3 ms, allocating nothing.  (A pure-Python loop is no
# steadier: on an H200 host its readings moved between 3 and 5 ms from
# process to process while the loops' own time did not.  This one moved
# between 3.9 and 7.7 ms on another H200 host: see the docstring.)
_PACE_BUFFER = bytes(range(256)) * 1024  # 256 KiB
_PACE_ROUNDS = 64


def pace_seconds():
    """Seconds this CPU takes for the fixed reference work, now."""
    start = time.perf_counter()
    crc = 0
    for _ in range(_PACE_ROUNDS):
        crc = zlib.crc32(_PACE_BUFFER, crc)
    return time.perf_counter() - start


def run_paced(step, n, chunks, before_chunk=None, after_chunk=None):
    """Runs step() n times in `chunks` chunks, with a pace reading before
    each chunk.  before_chunk/after_chunk run untimed around each chunk.
    Returns (seconds the chunks took, steps run, median paced time per step,
    median pace seconds)."""
    per_chunk = max(1, n // chunks)
    total = 0.0
    paced, paces = [], []
    for _ in range(chunks):
        pace = pace_seconds()
        if before_chunk:
            before_chunk()
        start = time.perf_counter()
        for _ in range(per_chunk):
            step()
        seconds = time.perf_counter() - start
        if after_chunk:
            after_chunk()
        total += seconds
        paced.append(seconds / per_chunk / pace)
        paces.append(pace)
    return total, per_chunk * chunks, statistics.median(paced), statistics.median(paces)
