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
# Workloads whose rate is per call or per kernel: the summary also prints
# the ns each variant adds to one of them.
PER_UNIT_WORKLOADS = {"api_calls": "call (CPU)", "launch_cpu": "launch (CPU)",
                      "graph_kernels": "kernel (GPU)"}
# How far apart the variants' median pace readings may be for the paced
# figures to judge: a tracer must not move the reference.
PACE_AGREEMENT = 1.10
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


def speed(result, paced):
    """A run's speed, higher is faster: its rate, or with paced=True the
    inverse of its paced time per step (bench/cpu_pace.py), so that both
    give overhead = 1 - speed(variant) / speed(untraced)."""
    if not paced:
        return result["rate"]
    return 1 / result["paced_step"] if result.get("paced_step") else None


def overheads(seq, paced=False):
    """variant -> (median speed, overhead of medians %, round-by-round overhead %, n).
    Speed is the rate, or with paced=True 1/paced_step; runs without it are left out."""
    seq = [(v, res) for v, res in seq if speed(res, paced)]
    base = median_or_nan([speed(res, paced) for v, res in seq if v == "untraced"])
    ratios, speeds = {}, {}
    for i, (variant, result) in enumerate(seq):
        speeds.setdefault(variant, []).append(speed(result, paced))
        if variant == "untraced":
            continue
        before = [speed(res, paced) for v, res in seq[:i] if v == "untraced"][-1:]
        after = [speed(res, paced) for v, res in seq[i + 1:] if v == "untraced"][:1]
        if before or after:
            ratios.setdefault(variant, []).append(speed(result, paced) / statistics.mean(before + after))
    out = {}
    for variant, values in speeds.items():
        m = statistics.median(values)
        by_round = (1 - statistics.median(ratios[variant])) * 100 if variant in ratios else 0.0
        out[variant] = (m, (1 - m / base) * 100, by_round, len(values))
    return out


def median_pace_ms(seq, variant):
    return median_or_nan([res["pace_ms"] for v, res in seq if v == variant and "pace_ms" in res])


def print_breakdown(runs):
    print(f"{'workload':<11} {'variant':<40} {'median rate':>12} {'overhead':>9} {'by round':>9}"
          f" {'paced':>7} {'by round':>9} {'pace ms':>8}  n   {'enqueue/s':>10} {'GPU/s':>10}")
    for workload, seq in runs.items():
        paced = overheads(seq, paced=True)
        base_paced = paced.get("untraced", (float("nan"),))[0]
        for variant, (m, ovh, by_round, n) in overheads(seq).items():
            p_m, p_ovh, p_round, _ = paced.get(variant, (float("nan"),) * 3 + (0,))
            extra = ""
            parts = [res for v, res in seq if v == variant and "gpu_rate" in res]
            if parts:
                extra = (f"   {statistics.median(p['enqueue_rate'] for p in parts):>10.0f}"
                         f" {statistics.median(p['gpu_rate'] for p in parts):>10.0f}")
            if workload in PER_UNIT_WORKLOADS and base_rate(seq) > 0 and m > 0:
                # What each call or kernel costs more than untraced, from the
                # medians; from the paced medians too where the runs have them
                # (converted back to ns at the untraced runs' median pace).
                extra = (f"   {(1 / m - 1 / base_rate(seq)) * 1e9:>+8.0f} ns/"
                         f"{PER_UNIT_WORKLOADS[workload]}")
                if p_m == p_m and base_paced == base_paced:
                    added = (1 / p_m - 1 / base_paced) * median_pace_ms(seq, "untraced") * 1e6
                    extra += f", paced {added:+.0f} ns"
            print(f"{workload:<11} {variant:<40} {m:>12.0f} {ovh:>8.1f}% {by_round:>8.1f}%"
                  f" {p_ovh:>6.1f}% {p_round:>8.1f}% {median_pace_ms(seq, variant):>8.3f}  {n}{extra}")
    print_thread_split(runs)
    print("(overhead: of the medians; by round: each run against its untraced neighbours, median;"
          " paced: the same from each run's time per step in units of the CPU's pace next to it"
          " (bench/cpu_pace.py), with the variant's median pace reading;"
          " raw_launch's enqueue/s and GPU/s: launches over CPU time to enqueue, over GPU time;"
          " api_calls: CPU time added per traced call; launch_cpu: CPU time added per launch call;"
          " graph_kernels: GPU time added per kernel)")


def print_thread_split(runs):
    """For workloads that report "threads" (gpu_overhead.py): each variant's
    median on-CPU us per iteration of each thread name, run-queue us after
    the slash, so that a tracer's cost shows on which thread it lands."""
    for workload, seq in runs.items():
        split = {}
        for variant, res in seq:
            for name, t in (res.get("threads") or {}).items():
                split.setdefault(variant, {}).setdefault(name, []).append((t["cpu_us"], t["runq_us"]))
        if not split:
            continue
        names = []
        for per_name in split.values():
            for name, values in per_name.items():
                if name not in names and statistics.median(v[0] for v in values) >= 1.0:
                    names.append(name)
        print(f"\n{workload}: us per iteration on CPU / in the run queue, by thread (medians)")
        print(f"{'variant':<40}" + "".join(f" {name[:15]:>17}" for name in names))
        for variant, per_name in split.items():
            cells = ""
            for name in names:
                values = per_name.get(name, [])
                cells += (f" {statistics.median(v[0] for v in values):>9.1f}/"
                          f"{statistics.median(v[1] for v in values):<7.1f}" if values else f" {'-':>17}")
            print(f"{variant:<40}{cells}")


def base_rate(seq):
    return median_or_nan([res["rate"] for v, res in seq if v == "untraced"])


def spread_pct(values):
    """Coefficient of variation, %: how far single runs scatter."""
    return statistics.stdev(values) / statistics.mean(values) * 100 if len(values) > 1 else float("nan")


def print_headline(runs):
    """Overheads of the medians, raw and paced (bench/cpu_pace.py), per
    variant.  The verdict goes by the paced figures only where pacing worked
    on these runs (see pacing_works below); the evidence for that is printed
    under the table: the untraced runs' scatter raw and paced, and each
    variant's median pace reading."""
    header = f"{'workload':<11} {'untraced':>10}"
    for _, title in HEADLINE:
        header += f" {title:>11} {'ovh':>6} {'paced':>6}"
    print(header + f" {'target':>6}  verdict ({', '.join(t for _, t in HEADLINE[:2])})")
    checks = []
    nan = (float("nan"),) * 3 + (0,)
    for workload in ("py_launch", "raw_launch", "py_train"):
        if workload not in runs:
            continue
        table = overheads(runs[workload])
        paced = overheads(runs[workload], paced=True)
        if "untraced" not in table:
            continue
        line = f"{workload:<11} {table['untraced'][0]:>10.0f}"
        for variant, _ in HEADLINE:
            m, ovh, _r, _n = table.get(variant, nan)
            line += f" {m:>11.0f} {ovh:>5.1f}% {paced.get(variant, nan)[1]:>5.1f}%"
        target = TARGETS[workload]
        untraced = [res for v, res in runs[workload] if v == "untraced"]
        raw_scatter = spread_pct([r["rate"] for r in untraced])
        paced_scatter = spread_pct([1 / r["paced_step"] for r in untraced if r.get("paced_step")])
        # Paced figures judge only where pacing did its job on these runs:
        # the untraced runs scatter less paced than raw, and the variants'
        # pace readings agree (a reference that itself moves between
        # processes, as it did in the PyTorch loops on an H200, would turn
        # its own scatter into overheads).
        paces = [median_pace_ms(runs[workload], v) for v, _ in [("untraced", "")] + HEADLINE]
        paces = [p for p in paces if p == p]
        paces_agree = bool(paces) and max(paces) <= PACE_AGREEMENT * min(paces)
        pacing_works = "untraced" in paced and paced_scatter < raw_scatter and paces_agree
        judged = paced if pacing_works else table

        def verdict(variant):
            ovh = judged.get(variant, nan)[1]
            profiler = judged.get("profiler", nan)[1]
            return "meets" if ovh <= target and (profiler != profiler or ovh < profiler) else "MISSES"

        print(f"{line} {target:>5.0f}%  {verdict('gpuos')}, {verdict('gpuos-lite')}"
              f"  (n={table['untraced'][3]} rounds, medians{', paced' if judged is paced else ''})")
        if "untraced" in paced:
            readings = "  ".join(f"{title} {median_pace_ms(runs[workload], v):.3f}"
                                 for v, title in [("untraced", "untraced")] + HEADLINE)
            checks.append(f"  pacing, {workload}: untraced scatter: rate {raw_scatter:.1f}%, paced {paced_scatter:.1f}%"
                          f"; median pace ms: {readings} ({'agree' if paces_agree else 'DISAGREE'});"
                          f" {'paced' if judged is paced else 'raw'} figures judge")
    if checks:
        print("(ovh: of the medians of raw rates; paced: of the medians of paced times per step"
              " (bench/cpu_pace.py).  The paced figures judge only where the untraced runs scatter"
              " less paced than raw and the variants' median pace readings agree within"
              f" {(PACE_AGREEMENT - 1) * 100:.0f}%:)")
        for line in checks:
            print(line)


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
