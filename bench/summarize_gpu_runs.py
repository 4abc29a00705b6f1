#!/usr/bin/env python3
"""Summarizes the JSON lines that bench/run_gpu_overhead.sh and
bench/gpu_overhead_breakdown.sh write ({"variant", "workload", "result":
{"rate", ...}} per run), two ways:
- overhead of medians: 1 - median(variant's rates) / median(untraced rates);
- round by round: each run against the untraced runs of the same workload
  just before and after it (their mean), then the median of those ratios,
  so that a slow stretch of the machine that hits neighbours alike cancels.

  summarize_gpu_runs.py RUNS.jsonl                 one row per workload and variant
  summarize_gpu_runs.py RUNS.jsonl --headline      run_gpu_overhead.sh's table, with targets
Standard library only (the bare GPU machine).
"""
import argparse
import json
import statistics
import sys

TARGETS = {"py_launch": 15.0, "raw_launch": 15.0, "py_train": 5.0}
HEADLINE = [("gpuos", "gpuos-trace"), ("gpuos-lite", "gpuos lite"), ("profiler", "torch.prof"),
            ("cupti", "CUPTI alone")]


def read_runs(path):
    """Per workload, the runs in file order: [(variant, result dict)]."""
    runs = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("result"):
                    runs.setdefault(r["workload"], []).append((r["variant"], r["result"]))
    return runs


def median_or_nan(values):
    return statistics.median(values) if values else float("nan")


def overheads(seq):
    """variant -> (median rate, overhead of medians %, round-by-round overhead %, n)."""
    base = median_or_nan([res["rate"] for v, res in seq if v == "untraced"])
    ratios, rates = {}, {}
    for i, (variant, result) in enumerate(seq):
        rates.setdefault(variant, []).append(result["rate"])
        if variant == "untraced":
            continue
        before = [res["rate"] for v, res in seq[:i] if v == "untraced"][-1:]
        after = [res["rate"] for v, res in seq[i + 1:] if v == "untraced"][:1]
        if before or after:
            ratios.setdefault(variant, []).append(result["rate"] / statistics.mean(before + after))
    out = {}
    for variant, values in rates.items():
        m = statistics.median(values)
        by_round = (1 - statistics.median(ratios[variant])) * 100 if variant in ratios else 0.0
        out[variant] = (m, (1 - m / base) * 100, by_round, len(values))
    return out


def print_breakdown(runs):
    print(f"{'workload':<11} {'variant':<40} {'median rate':>12} {'overhead':>9} {'by round':>9}  n"
          f"   {'enqueue/s':>10} {'GPU/s':>10}")
    for workload, seq in runs.items():
        for variant, (m, ovh, by_round, n) in overheads(seq).items():
            extra = ""
            parts = [res for v, res in seq if v == variant and "gpu_rate" in res]
            if parts:
                extra = (f"   {statistics.median(p['enqueue_rate'] for p in parts):>10.0f}"
                         f" {statistics.median(p['gpu_rate'] for p in parts):>10.0f}")
            if workload == "api_calls" and base_rate(seq) > 0 and m > 0:
                # What each call costs more than untraced, from the medians.
                extra = f"   {(1 / m - 1 / base_rate(seq)) * 1e9:>+8.0f} ns/call"
            print(f"{workload:<11} {variant:<40} {m:>12.0f} {ovh:>8.1f}% {by_round:>8.1f}%  {n}{extra}")
    print("(overhead: of the medians; by round: each run against its untraced neighbours, median;"
          " raw_launch's enqueue/s and GPU/s: launches over CPU time to enqueue, over GPU time;"
          " api_calls: CPU time added per traced call)")


def base_rate(seq):
    return median_or_nan([res["rate"] for v, res in seq if v == "untraced"])


def print_headline(runs):
    header = f"{'workload':<11} {'untraced':>10}"
    for _, title in HEADLINE:
        header += f" {title:>11} {'ovh':>6} {'round':>6}"
    print(header + f" {'target':>6}  verdict ({', '.join(t for _, t in HEADLINE[:2])})")
    for workload in ("py_launch", "raw_launch", "py_train"):
        if workload not in runs:
            continue
        table = overheads(runs[workload])
        if "untraced" not in table:
            continue
        nan = (float("nan"),) * 3 + (0,)
        line = f"{workload:<11} {table['untraced'][0]:>10.0f}"
        for variant, _ in HEADLINE:
            m, ovh, by_round, _n = table.get(variant, nan)
            line += f" {m:>11.0f} {ovh:>5.1f}% {by_round:>5.1f}%"
        target = TARGETS[workload]
        profiler = table.get("profiler", nan)[1]

        def verdict(variant):
            ovh = table.get(variant, nan)[1]
            return "meets" if ovh <= target and (profiler != profiler or ovh < profiler) else "MISSES"

        print(f"{line} {target:>5.0f}%  {verdict('gpuos')}, {verdict('gpuos-lite')}"
              f"  (n={table['untraced'][3]} rounds, medians)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs")
    parser.add_argument("--headline", action="store_true")
    args = parser.parse_args()
    runs = read_runs(args.runs)
    print()
    if args.headline:
        print_headline(runs)
    else:
        print_breakdown(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
