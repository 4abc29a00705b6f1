#!/usr/bin/env python3
"""Capture windows on the GPU machine (issue #19, point 5):
  capture_check.py BIN_DIR [--model mlp] [--steps 1000] [--spec every=100,steps=5]
                   [--finalize-gap 1] [--no-marks] [--rounds 5] [--out DIR]

Runs bench/capture_workload.py (NVTX "step N" ranges, each ending with
loss.item(), so a step's kernels finish inside it) once as
  full              gpuos-trace with no options: kernels per step
then ROUNDS alternating rounds (order rotated each round) of:
  untraced          its step times (the job's own log, CLOCK_MONOTONIC)
  capture           gpuos-trace --capture SPEC, CUPTI subscribed all along
                    (GPUOS_CAPTURE_FINALIZE_GAP=off)
  finalize          the same with GPUOS_CAPTURE_FINALIZE_GAP=GAP (default 1:
                    CUPTI finalized at every gap between windows and
                    subscribed again at the next window; "off" skips it)
and checks, on each capture run's trace (gpuos-trace dump):
  1. windows open at the steps the spec names (OPEN step, CLOSE step);
  2. every kernel of the job lies inside a window, and each window holds
     exactly kernels-per-step (from the full run) x its steps;
  3. the job's step time outside windows equals its untraced step time
     within noise: per round, the median step outside windows over the
     same round's untraced median; the median of those ratios within
     max(3%, half the spread of the untraced rounds' medians) of 1 (the
     steps right after a window, whose flush lands there, are counted
     apart; single runs on these hosts spread by +-15%);
  4. finalize run only: the shim's status says CUPTI was finalized between
     windows (not merely unsubscribed, and not refused);
  5. each window after the first says on its OPEN edge that it subscribed
     CUPTI again (finalize runs; none does in capture runs), and the
     report leaves the first step of each such window out of its GPU side
     (step_analysis.window_start_steps, the steps' window_start).
With --no-marks the job marks no steps (no NVTX ranges, traced with
--no-python-hooks): the shim counts them live from the rhythm of its CUDA
calls (cupti_shim/live_step_rhythm.h), CUPTI stays subscribed (no finalize
run), and the capture run's report must take its steps from the shim's
marks, with CUDA detail in exactly the windows' steps.
Prints PASS/FAIL lines and the overhead table (median step ms and loss
against untraced: full detail, capture windows, and outside windows only).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "..", "..", "bench", "capture_workload.py")


def run(cmd, log, env=None):
    with open(log, "w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=300,
                              env=dict(os.environ, **(env or {})))
    if done.returncode != 0:
        sys.exit("FAIL %s: rc=%d (see %s)" % (" ".join(cmd[:4]), done.returncode, log))
    return json.loads(done.stdout.strip().splitlines()[-1])


def step_log(path):
    out = {}
    for line in open(path):
        n, start, end = (int(x) for x in line.split())
        out[n] = (start, end)
    return out


def dump(trace, path):
    with open(path, "w") as out:
        subprocess.run([TRACE, "dump", trace], stdout=out, check=True, timeout=300)
    header, events = {}, []
    for line in open(path):
        rec = json.loads(line)
        if "header" in rec:
            header = rec["header"]
        elif "event" in rec:
            events.append(rec["event"])
    return header, events


def kernels_of(events, pid):
    return sorted(int(e.get("ts_ns", 0)) for e in events if "gpu_kernel" in e and int(e.get("pid", 0)) == pid)


def cupti_status(events, pid):
    status = ""
    for e in events:
        if "shim_stats" in e and int(e.get("pid", 0)) == pid:
            stats = e["shim_stats"]
            status = stats.get("cupti_status", stats.get("cuptiStatus", "")) or status
    return status


def windows_of(events, pid):
    """The capture windows of process pid: (start_ns, end_ns, first step, last step)."""
    windows, opened = [], None
    for e in events:
        if "capture_window" not in e or int(e.get("pid", 0)) != pid:
            continue
        w = e["capture_window"]
        if w.get("edge") == "OPEN":
            opened = (int(e["ts_ns"]), int(w.get("step", 0)))
        elif w.get("edge") == "CLOSE" and opened:
            windows.append((opened[0], int(e["ts_ns"]), opened[1], int(w.get("step", 0))))
            opened = None
    return windows


def outside_windows(steps_log, windows):
    """The job's own step times (ms, after step 20) outside the windows, and
    those of the 2 steps right after each window, where its flush lands."""
    steps = step_log(steps_log)
    # The job's steps that overlap a window, by time (the shim's step
    # numbers are the job's only where the job marks them).
    in_window, after_window = set(), set()
    for start, end, _, _ in windows:
        inside = [n for n, (s, e) in steps.items() if s < end and e > start]
        in_window.update(inside)
        if inside:
            after_window.update(range(max(inside) + 1, max(inside) + 3))
    outside = [(e - s) / 1e6 for n, (s, e) in steps.items()
               if n >= 20 and n not in in_window and n not in after_window]
    after = [(e - s) / 1e6 for n, (s, e) in steps.items() if n >= 20 and n in after_window]
    return outside, after


def untraced_median(steps_log):
    return statistics.median((e - s) / 1e6 for n, (s, e) in step_log(steps_log).items() if n >= 20)


def check_windows(trace, jsonl, kpe, spec, verdict, label):
    """Checks 1-2 on one capture run; returns its windows, events and pid."""
    header, events = dump(trace, jsonl)
    pid = int(header.get("root_pid", 0))
    verdict(header.get("capture_spec") == spec, "%sthe trace names the spec (%s)" % (label, header.get("capture_spec")))
    windows = windows_of(events, pid)
    verdict(len(windows) > 0, "%s%d capture windows in the trace" % (label, len(windows)))
    kernels = kernels_of(events, pid)
    inside = 0
    for start, end, first, last in windows:
        n = sum(1 for k in kernels if start <= k <= end)
        inside += n
        expected = kpe * (last - first + 1) if first >= 20 else None
        if expected is not None:
            verdict(n == expected, "%swindow steps %d..%d: %d kernels, %d x %d expected" %
                    (label, first, last, n, kpe, last - first + 1))
    verdict(inside == len(kernels), "%severy kernel inside a window (%d of %d)" % (label, inside, len(kernels)))
    return windows, events, pid


def check_outside_rate(rounds, verdict, label):
    """Check 3 over the rounds: [(untraced median ms, outside median ms)];
    returns the median outside/untraced ratio."""
    ratios = [outside / base for base, outside in rounds]
    bases = [base for base, _ in rounds]
    noise = (max(bases) - min(bases)) / statistics.median(bases) / 2
    ratio = statistics.median(ratios)
    bound = max(0.03, noise)
    verdict(abs(ratio - 1) <= bound,
            "%sstep time outside windows vs untraced, %d paired rounds: median %+.1f%% (rounds %s; within "
            "%.1f%%: 3%% or half the untraced rounds' spread)" %
            (label, len(rounds), 100 * (ratio - 1), " ".join("%+.1f%%" % (100 * (r - 1)) for r in ratios),
             100 * bound))
    return ratio


def check_window_starts(trace, path, events, pid, finalized, verdict, label):
    """Check 5: a window whose opening subscribed CUPTI again (finalized
    between windows) says so on its OPEN edge, every later one does where
    CUPTI was finalized and none does where it stayed subscribed, and the
    report leaves the first step of each such window out of its GPU side."""
    opens = [e["capture_window"] for e in events
             if "capture_window" in e and int(e.get("pid", 0)) == pid and e["capture_window"].get("edge") == "OPEN"]
    flagged = [bool(w.get("cupti_subscribed")) for w in opens]
    expected = [finalized and i > 0 for i in range(len(opens))]
    verdict(flagged == expected, "%sOPEN edges that subscribed CUPTI again: %d of %d (%s expected)" %
            (label, sum(flagged), len(opens), "all but the first" if finalized else "none"))
    with open(path, "w") as out:
        subprocess.run([TRACE, "report", trace, "--format", "json"], stdout=out, check=True, timeout=300)
    report = json.load(open(path))
    left_out = report.get("step_analysis", {}).get("window_start_steps", -1)
    starts = [s["index"] for s in report.get("steps", []) if s.get("window_start")]
    verdict(left_out == sum(flagged) == len(starts),
            "%sreport: %d window-start steps left out of the GPU side (%s), %d windows subscribed CUPTI again" %
            (label, left_out, starts[:10], sum(flagged)))


def check_live_rhythm_report(trace, path, shim_windows, verdict):
    """--no-marks: the report's steps are the shim's live count: each closed
    window of the trace (the shim's own step numbers on its edges) is a
    window of the report over the same steps, and those steps, and no
    others, have CUDA detail."""
    with open(path, "w") as out:
        subprocess.run([TRACE, "report", trace, "--format", "json"], stdout=out, check=True, timeout=300)
    report = json.load(open(path))
    analysis = report.get("step_analysis", {})
    source, note = analysis.get("source", ""), analysis.get("note", "")
    verdict(source == "cuda_api_rhythm" and "counted live in the job by the shim" in note,
            "report steps from the shim's live count (source %s; %s)" % (source, note[:160]))
    reported = {(w.get("first_step"), w.get("last_step")) for w in report.get("capture", {}).get("windows", [])}
    shim = {(first, last) for _, _, first, last in shim_windows}
    verdict(bool(shim) and shim <= reported,
            "report windows on the shim's steps: shim %s, report %s" % (sorted(shim), sorted(reported, key=str)))
    wanted = set()
    for first, last in shim:
        wanted.update(range(first, last + 1))
    detail = {s["index"] for s in report.get("steps", []) if s.get("cuda_detail")}
    verdict(detail == wanted, "report: steps with CUDA detail %s, the shim's window steps %s" %
            (sorted(detail)[:12], sorted(wanted)[:12]))


def main():
    global TRACE
    parser = argparse.ArgumentParser()
    parser.add_argument("bin_dir")
    parser.add_argument("--model", default="mlp", choices=["mlp", "resnet18"])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--spec", default="every=100,steps=5")
    parser.add_argument("--finalize-gap", default="1",
                        help="GPUOS_CAPTURE_FINALIZE_GAP of the finalize run; off: no such run")
    parser.add_argument("--no-marks", action="store_true",
                        help="a job that marks no steps: the shim counts them from its CUDA calls")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating rounds of untraced and capture runs for check 3 (at least 1)")
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpuos-capture-"))
    args = parser.parse_args()
    TRACE = os.path.join(args.bin_dir, "gpuos-trace")
    os.makedirs(args.out, exist_ok=True)
    o = lambda name: os.path.join(args.out, name)
    job = ["python3", WORKLOAD, "--model", args.model, "--steps", str(args.steps)]
    traced_job = [TRACE, "-q"]
    if args.no_marks:
        job.append("--no-marks")
        traced_job.append("--no-python-hooks")
        args.finalize_gap = "off"  # nothing without CUPTI would count the steps
    failures = 0

    def verdict(ok, what):
        nonlocal failures
        failures += not ok
        print("%s %s" % ("PASS" if ok else "FAIL", what))

    full = run(traced_job + ["-o", o("full.gpuos"), "--"] + job + ["--log-steps", o("full.steps")],
               o("full.stderr"))

    # Rounds of the untraced and capture runs, their order rotated each
    # round: check 3 compares each capture run with the untraced run of
    # its own round.
    def untraced_run(r):
        return run(job + ["--log-steps", o("untraced_%d.steps" % r)], o("untraced_%d.stderr" % r))

    def capture_run(r, name, gap):
        return run(traced_job + ["--capture", args.spec, "-o", o("%s_%d.gpuos" % (name, r)), "--"] + job +
                   ["--log-steps", o("%s_%d.steps" % (name, r))], o("%s_%d.stderr" % (name, r)),
                   env={"GPUOS_CAPTURE_FINALIZE_GAP": gap})

    # capture: CUPTI subscribed all along, device kinds switched at window
    # edges; finalize: CUPTI taken out between windows.
    variants = {"untraced": untraced_run, "capture": lambda r: capture_run(r, "capture", "off")}
    if args.finalize_gap != "off":
        variants["finalize"] = lambda r: capture_run(r, "finalize", args.finalize_gap)
    names = list(variants)
    results = {name: [] for name in names}
    for r in range(max(1, args.rounds)):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(variants[name](r))

    # Kernels per step from the full run: steady after the warm-up.
    header, events = dump(o("full.gpuos"), o("full.jsonl"))
    pid = int(header.get("root_pid", 0))
    full_steps = step_log(o("full.steps"))
    kernels = kernels_of(events, pid)
    per_step = []
    for n in range(20, args.steps):
        start, end = full_steps[n]
        per_step.append(sum(1 for k in kernels if start <= k <= end))
    kpe = statistics.mode(per_step)
    verdict(min(per_step) == max(per_step) == kpe,
            "full run: %d kernels in every step after the warm-up (min %d, max %d)" % (kpe, min(per_step), max(per_step)))

    # Checks 1-2 on every capture run; check 3 over the rounds.
    table = {}
    for name in names[1:]:
        label = "" if name == "capture" else name + ": "
        paired, after_all = [], []
        for r in range(len(results[name])):
            windows, events, cap_pid = check_windows(o("%s_%d.gpuos" % (name, r)), o("%s_%d.jsonl" % (name, r)), kpe,
                                                     args.spec, verdict, "%sround %d: " % (label, r + 1))
            if r == 0 and args.no_marks and name == "capture":
                check_live_rhythm_report(o("capture_0.gpuos"), o("capture_report.json"), windows, verdict)
            if not args.no_marks:
                check_window_starts(o("%s_%d.gpuos" % (name, r)), o("%s_%d_report.json" % (name, r)), events,
                                    cap_pid, name == "finalize", verdict, "%sround %d: " % (label, r + 1))
            if name == "finalize":
                status = cupti_status(events, cap_pid)
                verdict("between capture windows: CUPTI finalized" in status,
                        "%sround %d: the shim says CUPTI was finalized between windows (cupti_status: %s)" %
                        (label, r + 1, status))
            outside, after = outside_windows(o("%s_%d.steps" % (name, r)), windows)
            paired.append((untraced_median(o("untraced_%d.steps" % r)), statistics.median(outside)))
            after_all += after
        ratio = check_outside_rate(paired, verdict, label)
        table[name] = (ratio, statistics.median(after_all) / statistics.median(b for b, _ in paired)
                       if after_all else None)

    def median_of(name, key):
        return statistics.median(x[key] for x in results[name])

    base_ms = median_of("untraced", "median_step_ms")
    print("\noverhead table (%s, %d steps; medians over %d alternating rounds; loss against untraced)" %
          (args.model, args.steps, len(results["untraced"])))
    print("%-28s %10s %8s" % ("variant", "step ms", "loss"))
    rows = [("untraced", base_ms), ("gpuos-trace (full detail, 1 run)", full["median_step_ms"])]
    for name in names[1:]:
        title = "--capture " + args.spec if name == "capture" else "  CUPTI finalized between"
        rows.append((title, median_of(name, "median_step_ms")))
        ratio, after_ratio = table[name]
        rows.append(("  steps outside windows (paired)", base_ms * ratio))
        if after_ratio is not None:
            rows.append(("  2 steps after each window", base_ms * after_ratio))
    for name, ms in rows:
        print("%-32s %10.3f %+7.1f%%" % (name, ms, 100 * (ms / base_ms - 1)))
    print("rates (steps/s, medians): %s" % ", ".join(
        "%s %.1f" % (name, median_of(name, "steps_per_s")) for name in names))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
