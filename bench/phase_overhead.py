#!/usr/bin/env python3
"""What gpuos-trace's OS side costs a training loop's step rate, with the
traced and untraced phases in ONE job.

  sudo bench/phase_overhead.py [BIN_DIR] [--rounds N] [--phase-seconds S]
                               [--variants os,os-without:offcpu,...]
                               [--toggle-ms P | --marks-toggle-ms P]
                               [--model mlp|resnet18] [--pin CPUS]
                               [--device cuda|cpu] [--keep DIR]

One bench/capture_workload.py job runs untraced for the whole benchmark and
logs every step's start and end (CLOCK_MONOTONIC).  Between untraced phases
of S seconds, `gpuos-trace --pid JOB --duration S` attaches one variant's
BPF programs (the same ones `gpuos-trace -- cmd` loads: attach only changes
how the job becomes traced).  Each traced phase's step rate is compared
with the mean of the untraced phases on either side of it; the variants
take turns, so every one sees the job at every age.

Why: on the GPU hosts separate runs of the 1 ms MLP spread by 10-15% from
one process to the next (CPU placement, clocks, allocator state), more than
the cost being measured (docs/capture-results.md).  Inside one process that
spread is absent, and "drift" (the untraced phase after against the one
before) shows what is left of it.

Variants (comma list):
  os                  --no-cuda: the OS side alone, as --always-on records it
  os-without:A+B      the same with BPF sources or programs A and B left
                      unattached (GPUOS_BENCH_DETACH: offcpu, faults,
                      syscalls, block_io, torch_uprobes, a program's name)
  opts:OPTIONS        --no-cuda and these gpuos-trace options ('+' for spaces)

--toggle-ms P: one tracer per variant and round (phases of S seconds),
taking the job out of the traced set and back every P ms
(GPUOS_BENCH_TOGGLE) with its programs left attached: the loss of each
"on" span against the "off" spans on either side.  It measures recording
the job's events alone (not what attached programs cost an untraced
thread, nor a uprobe's trap, which stay), at a rhythm fast enough that the
host's drift cancels.

Only the job's own process goes in and out of the trace: children it
forks stay traced throughout (bench_toggle.h).

--marks-toggle-ms P: the shim's side instead.  One job per variant and
round, launched under `gpuos-trace VARIANT -- job` for S seconds after its
warmup, its NVTX and Python-hook marks switched off and on every P ms
(GPUOS_BENCH_MARKS_TOGGLE, cupti_shim/bench_marks_toggle.h): the loss of
each "on" span against the "off" spans on either side is what recording
the marks costs.  What an "off" mark still costs (the Python hook's frame,
the call into the shim) and the OS side (on throughout) are in both.
Variants: always-on (--always-on), control (the same, flips logged but
marks never off), opts:OPTIONS.

A traced phase spans the trace's first to last event, less --margin seconds
at each end (the attach's and the detach's own transients); an untraced
phase spans the time between two tracers, less the same margins.  Prints one
row per phase (per span with --verbose), then per variant: loss of step
rate (traced against the mean of its two neighbours), its median with a 95%
interval, min..max, pooled over all spans, the median step's growth, and the
drift between neighbours.  The interval resamples blocks of 4 consecutive
spans of one tracer run, since neighbouring spans share an untraced span.
"""
import argparse
import bisect
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# One stretch of the job: kind "traced" or "untraced"; run: the tracer run it
# belongs to (each attached phase is a run of its own; an untraced phase
# between attached ones belongs to none, -1).
Phase = collections.namedtuple("Phase", "kind variant run begin end dropped")


def variant_command(tracer, name, pid, seconds, out, toggle=None):
    """The tracer's argv and environment for one traced phase of VARIANT;
    toggle: (period_ms, log) for GPUOS_BENCH_TOGGLE."""
    argv = [tracer, "-q", "--no-cuda", "--pid", str(pid), "--duration", "%gs" % seconds, "-o", out]
    env = dict(os.environ)
    if toggle:
        env["GPUOS_BENCH_TOGGLE"] = "%d:%s" % toggle
    if name.startswith("os-without:"):
        env["GPUOS_BENCH_DETACH"] = name[len("os-without:"):].replace("+", ",")
    elif name.startswith("opts:"):
        argv[1:1] = name[len("opts:"):].split("+")
    elif name != "os":
        raise SystemExit("phase_overhead: unknown variant %r (os, os-without:A+B, opts:OPTIONS)" % name)
    return argv, env


def launched_variant(tracer, name, out, toggle):
    """The tracer's argv prefix (up to "--") and environment for a job
    launched under VARIANT with its marks toggled: toggle (period_ms, log)."""
    env = dict(os.environ)
    env["GPUOS_BENCH_MARKS_TOGGLE"] = "%d:%s" % toggle
    if name in ("always-on", "control"):
        options = ["--always-on"]
        if name == "control":
            env["GPUOS_BENCH_MARKS_TOGGLE_DRY"] = "1"
    elif name.startswith("opts:"):
        options = name[len("opts:"):].split("+")
    else:
        raise SystemExit("phase_overhead: unknown variant %r with --marks-toggle-ms (always-on, control, "
                         "opts:OPTIONS)" % name)
    return [tracer, "-q"] + options + ["-o", out, "--"], env


def trace_report(tracer, path):
    return json.loads(subprocess.run([tracer, "report", path, "--format", "json"], check=True,
                                     capture_output=True, text=True).stdout)


def trace_span(tracer, path):
    """(first_event_ns, last_event_ns, dropped) of a trace, from its report."""
    data = trace_report(tracer, path)
    return data["first_event_ns"], data["last_event_ns"], data["dropped_events"]


# The stretch around a capture window whose toggled spans are left out, and
# over which the window's own cost is measured: the window's edges
# subscribe CUPTI before its first step and take it out after its last.
WINDOW_BEFORE_NS = 200_000_000
WINDOW_AFTER_NS = 500_000_000


def window_losses(steps, windows, before_ns=WINDOW_BEFORE_NS, after_ns=WINDOW_AFTER_NS):
    """What each capture window (the report's capture.windows) costs the job,
    in ms: the time from `before_ns` before the window to `after_ns` after
    it, less what the steps done in it take at the job's mean step period
    outside every window's stretch.  Only windows
    with a full stretch of steps on either side."""
    if len(steps) < 3 or not windows:
        return []
    stretches = [(w["start_ns"] - before_ns, w["end_ns"] + after_ns) for w in windows]
    outside = [s for s in steps if not any(b <= s[0] <= e for b, e in stretches)]
    if len(outside) < 3:
        return []
    starts = [s[0] for s in steps]
    # The mean, not the median: stalls happen outside windows too.
    gaps = [b[0] - a[0] for a, b in zip(outside, outside[1:])
            if not any(a[0] < e and b[0] > s for s, e in stretches)]
    period = statistics.mean(gaps)
    losses = []
    for begin, end in stretches:
        if begin < steps[0][0] or end > steps[-1][0]:
            continue
        done = bisect.bisect_right(starts, end) - bisect.bisect_left(starts, begin)
        losses.append((end - begin - done * period) / 1e6)
    return losses


def span_figures(steps, starts, begin_ns, end_ns):
    """Of the steps (start_ns, end_ns; starts: their start_ns, sorted) that
    start between begin and end: the steps a second, their count and
    seconds (first start to last start), and the median step's length in
    us; None when fewer than 3."""
    inside = steps[bisect.bisect_left(starts, begin_ns):bisect.bisect_right(starts, end_ns)]
    if len(inside) < 3:
        return None
    seconds = (inside[-1][0] - inside[0][0]) / 1e9
    return dict(rate=(len(inside) - 1) / seconds, steps=len(inside) - 1, seconds=seconds,
                median_us=statistics.median((e - s) / 1e3 for s, e in inside))


def toggle_spans(log, margin):
    """[(kind, begin, end)] of a GPUOS_BENCH_TOGGLE log: "traced"/"untraced"
    spans between flips, less the margin at each end, starting and ending
    with an untraced one (so that each traced span has one on either side)."""
    if not os.path.exists(log):
        raise SystemExit("phase_overhead: the tracer wrote no toggle log %s (a gpuos-trace without "
                         "GPUOS_BENCH_TOGGLE?)" % log)
    flips = [(kind, int(ns)) for kind, ns in (line.split() for line in open(log))]
    spans = [("traced" if kind == "on" else "untraced", begin + margin, end - margin)
             for (kind, begin), (_, end) in zip(flips, flips[1:])]
    while spans and spans[0][0] == "traced":
        spans.pop(0)
    while spans and spans[-1][0] == "traced":
        spans.pop()
    return spans


def median_interval(runs, block=4, draws=2000):
    """A 95% interval of the median of the values in runs (one list per
    tracer run, in time order), resampling blocks of `block` consecutive
    values: neighbouring values share an untraced span, so single values
    are not independent.  None with fewer than 5 blocks."""
    blocks = [values[i:i + block] for values in runs for i in range(0, len(values), block)]
    if len(blocks) < 5:
        return None  # too few to resample
    rng = random.Random(1)
    medians = sorted(statistics.median(v for b in rng.choices(blocks, k=len(blocks)) for v in b)
                     for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


class Job:
    """The capture_workload.py job logging its steps to work/steps[TAG].txt
    until stopped: untraced, or under the tracer argv `launcher`."""

    def __init__(self, args, work, tag="", launcher=(), env=None):
        self.step_log = os.path.join(work, "steps%s.txt" % tag)
        self.out = os.path.join(work, "job%s.stdout" % tag)
        self.err = os.path.join(work, "job%s.stderr" % tag)
        cmd = [sys.executable, os.path.join(HERE, "capture_workload.py"), "--model", args.model,
               "--device", args.device, "--until-signal", "--log-steps", self.step_log]
        if args.pin:
            cmd = ["taskset", "-c", args.pin] + cmd  # taskset execs: the pid is the job's
        # Files, not pipes: nobody reads a pipe until the end.
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(list(launcher) + cmd, stdout=out, stderr=err, env=env)
        self.pid = self.process.pid if not launcher else None

    def job_pid(self):
        """The workload's pid (under a launcher: the tracer's child)."""
        if self.pid is None:
            children = "/proc/%d/task/%d/children" % (self.process.pid, self.process.pid)
            deadline = time.monotonic() + 60
            while self.pid is None:
                found = open(children).read().split() if os.path.exists(children) else []
                if found:
                    self.pid = int(found[0])
                elif self.process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("phase_overhead: the tracer started no job (see %s)" % self.err)
                else:
                    time.sleep(0.05)
        return self.pid

    def wait_warm(self, timeout_s=600):
        deadline = time.monotonic() + timeout_s
        while "warm\n" not in open(self.err).read():
            if self.process.poll() is not None:
                raise SystemExit("phase_overhead: the job ended before its warmup (see %s)" % self.err)
            if time.monotonic() > deadline:
                raise SystemExit("phase_overhead: the job was not warm after %d s (see %s)" % (timeout_s, self.err))
            time.sleep(0.1)

    def stop(self):
        """Ends the job; its result line, or "" if it had to be killed."""
        if self.process.poll() is None:
            os.kill(self.job_pid(), signal.SIGUSR1)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return ""
        return open(self.out).read().strip()

    def steps(self):
        return [tuple(int(x) for x in line.split()[1:3]) for line in open(self.step_log)]


def record_phases(args, tracer, job, work):
    """Runs the tracers; [Phase] in time order.  Every traced phase has an
    untraced one on either side of it, of the same tracer run when toggled."""
    variants = args.variants.split(",")
    phases = []
    margin = int(args.margin * 1e9)
    gap_start = time.monotonic_ns()
    for r in range(args.rounds):
        for i in range(len(variants)):
            name = variants[(r + i) % len(variants)]  # rotate the order each round
            run = r * len(variants) + i
            # (Toggled phases carry their own untraced spans.)
            time.sleep(0.5 if args.toggle_ms else args.phase_seconds)
            out = os.path.join(work, "phase-%d-%d.gpuos" % (r, i))
            toggle_log = out + ".toggle"
            argv, env = variant_command(tracer, name, job.pid, args.phase_seconds, out,
                                        (args.toggle_ms, toggle_log) if args.toggle_ms else None)
            started = time.monotonic_ns()
            if not args.toggle_ms:
                phases.append(Phase("untraced", "", -1, gap_start + margin, started - margin, 0))
            done = subprocess.run(argv, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit("phase_overhead: gpuos-trace failed: %s" % done.stderr.strip())
            first, last, dropped = trace_span(tracer, out)
            # The next untraced phase begins after the report, which competes
            # with the job for CPUs.
            gap_start = time.monotonic_ns()
            if args.toggle_ms:
                spans = toggle_spans(toggle_log, int(args.toggle_margin * 1e9))
                phases.extend(Phase(kind, name, run, b, e, dropped) for kind, b, e in spans)
            else:
                phases.append(Phase("traced", name, run, first + margin, last - margin, dropped))
    if not args.toggle_ms:
        time.sleep(args.phase_seconds)
        phases.append(Phase("untraced", "", -1, gap_start + margin, time.monotonic_ns() - margin, 0))
    return phases


def record_launched_phases(args, tracer, work):
    """--marks-toggle-ms: one launched job per variant and round; ([Phase]
    in time order, every job's steps, the last job's result line)."""
    variants = args.variants.split(",")
    phases, steps, result = [], [], ""
    windows = {}  # variant -> [(ms lost per window, the same half-way between windows, job seconds)]
    excluded = 0
    for r in range(args.rounds):
        for i in range(len(variants)):
            name = variants[(r + i) % len(variants)]
            run = r * len(variants) + i
            out = os.path.join(work, "run-%d-%d.gpuos" % (r, i))
            toggle_log = out + ".marks"
            launcher, env = launched_variant(tracer, name, out, (args.marks_toggle_ms, toggle_log))
            if args.tracer_pin:
                launcher = ["taskset", "-c", args.tracer_pin] + launcher
            job = Job(args, work, "-%d-%d" % (r, i), launcher, env)
            try:
                job.wait_warm()
                time.sleep(args.phase_seconds)
            finally:
                result = job.stop()
            if job.process.returncode != 0:
                raise SystemExit("phase_overhead: gpuos-trace failed (see %s)" % job.err)
            report = trace_report(tracer, out)
            capture = report.get("capture") or {}
            found = capture.get("windows", [])
            # A capture window opens at a step's start, which only a recorded
            # mark shows: windows fall in "on" spans.  Spans near one are
            # left out here; the window's own cost is measured below.
            near = [(w["start_ns"] - WINDOW_BEFORE_NS, w["end_ns"] + WINDOW_AFTER_NS) for w in found]
            for kind, b, e in toggle_spans(toggle_log, int(args.toggle_margin * 1e9)):
                if any(b < ne and e > nb for nb, ne in near):
                    kind = "near-window"
                    excluded += 1
                phases.append(Phase(kind, name, run, b, e, report["dropped_events"]))
            job_steps = job.steps()
            steps.extend(job_steps)
            seconds = (job_steps[-1][0] - job_steps[0][0]) / 1e9 if job_steps else 0
            windows.setdefault(name, []).append((window_losses(job_steps, found),
                                                 window_losses(job_steps, halfway_between(found)), seconds))
    print("# %d toggled spans within %.1f s before or %.1f s after a capture window left out" %
          (excluded, WINDOW_BEFORE_NS / 1e9, WINDOW_AFTER_NS / 1e9))
    print_window_costs(windows)
    return phases, sorted(steps), result


def halfway_between(windows):
    """The same stretches as `windows` (the report's), moved half-way to the
    next one (10 s apart when there is one): what window_losses gives
    where there is no window."""
    gap = (statistics.median(b["start_ns"] - a["start_ns"] for a, b in zip(windows, windows[1:]))
           if len(windows) > 1 else 10_000_000_000)
    return [{"start_ns": w["start_ns"] + gap // 2, "end_ns": w["end_ns"] + gap // 2} for w in windows]


def print_window_costs(windows):
    """windows: variant -> [(ms lost per window, the same half-way between
    windows, the job's seconds)], one tuple per job."""
    for name, runs in windows.items():
        losses = [ms for run, _, _ in runs for ms in run]
        placebo = [ms for _, run, _ in runs for ms in run] or [0]
        if losses:
            print("# %s: %d capture windows, each costing %.1f ms (mean; median %.1f, %.1f..%.1f), %.2f%% of the "
                  "jobs' time; the same stretches half-way between windows: mean %.1f ms (median %.1f, %.1f..%.1f)" %
                  (name, len(losses), statistics.mean(losses), statistics.median(losses), min(losses), max(losses),
                   100 * sum(losses) / 1e3 / sum(s for _, _, s in runs), statistics.mean(placebo),
                   statistics.median(placebo), min(placebo), max(placebo)))


def summarize(args, phases, steps, result):
    variants = args.variants.split(",")
    width = max(len(v) for v in variants + ["variant"])
    if args.marks_toggle_ms:
        print("# gpuos-trace's marks, on and off every %d ms in launched %s jobs (%s), %s" %
              (args.marks_toggle_ms, args.model, args.device, time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())))
    else:
        print("# gpuos-trace OS side, traced and untraced phases of one %s job (%s), %s" %
              (args.model, args.device, time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())))
    toggled = args.toggle_ms or args.marks_toggle_ms
    print("# %d rounds of %s; phases of %g s less %g s margins%s%s; job: %s" %
          (args.rounds, ",".join(variants), args.phase_seconds, args.margin,
           "; on/off every %d ms less %g s margins" % (toggled, args.toggle_margin) if toggled else "",
           "; job pinned to CPUs " + args.pin if args.pin else "", result))
    starts = [start for start, _ in steps]
    spans = [span_figures(steps, starts, p.begin, p.end) for p in phases]
    per_variant = {}  # variant -> {tracer run: [rows, in time order]}
    verbose = not toggled or args.verbose
    if verbose:
        print("%-4s %-*s %7s %9s %9s %8s %9s %8s %8s %6s" % ("#", width, "phase", "s", "steps/s", "U around",
                                                             "loss", "median us", "loss", "drift", "drops"))
    for k, (kind, name, run, begin, end, dropped) in enumerate(phases):
        if kind != "traced":
            continue
        if phases[k - 1].kind != "untraced" or phases[k + 1].kind != "untraced":
            continue  # beside a capture window (--marks-toggle-ms)
        before, after, traced = spans[k - 1], spans[k + 1], spans[k]
        if None in (before, after, traced):
            print("%-4d %-*s too short" % (k, width, name))
            continue
        around = {key: (before[key] + after[key]) / 2 for key in before}
        row = {
            "rate_loss": 100 * (1 - traced["rate"] / around["rate"]),
            "median_loss": 100 * (traced["median_us"] / around["median_us"] - 1),
            "drift": 100 * (after["rate"] / before["rate"] - 1),
            "traced": traced, "around": around,
        }
        runs = per_variant.setdefault(name, {})
        runs.setdefault(run, []).append(row)
        if verbose:
            print("%-4d %-*s %7.2f %9.1f %9.1f %+7.2f%% %9.1f %+7.2f%% %+7.2f%% %6d" %
                  (k, width, name, (end - begin) / 1e9, traced["rate"], around["rate"], row["rate_loss"],
                   traced["median_us"], row["median_loss"], row["drift"], dropped))
    print()
    print("per variant, over its traced spans: loss of step rate (1 - traced / mean of the untraced spans")
    print("before and after), its median, a 95% interval of that median (blocks of 4 neighbouring spans")
    print("resampled) and min..max; the same pooled (all traced steps over all traced time, against the")
    print("untraced spans beside them); and the median step's growth (median us of the traced span / mean")
    print("of its neighbours' - 1): robust to the stalls that make a span's rate jump")
    print("%-*s %3s %10s %8s %18s %18s %8s %9s %18s %8s" %
          (width, "variant", "n", "U steps/s", "loss", "loss 95%", "loss min..max", "pooled", "median+",
           "median+ min..max", "drift"))
    for name in variants:
        runs = list(per_variant.get(name, {}).values())
        rows = [row for run in runs for row in run]
        if not rows:
            print("%-*s   0 (no phase measured)" % (width, name))
            continue
        rate_loss = [r["rate_loss"] for r in rows]
        median_loss = [r["median_loss"] for r in rows]
        pooled_t = sum(r["traced"]["steps"] for r in rows) / sum(r["traced"]["seconds"] for r in rows)
        pooled_u = sum(r["around"]["steps"] for r in rows) / sum(r["around"]["seconds"] for r in rows)
        interval = median_interval([[r["rate_loss"] for r in run] for run in runs])
        interval = "%+8.2f..%+7.2f%%" % interval if interval else "%18s" % "-"
        print("%-*s %3d %10.1f %+7.2f%% %s %+8.2f..%+7.2f%% %+7.2f%% %+8.2f%% %+8.2f..%+7.2f%% %+7.2f%%" %
              (width, name, len(rows), statistics.median(r["around"]["rate"] for r in rows),
               statistics.median(rate_loss), interval, min(rate_loss), max(rate_loss),
               100 * (1 - pooled_t / pooled_u),
               statistics.median(median_loss), min(median_loss), max(median_loss),
               statistics.median(r["drift"] for r in rows)))


def run(args):
    tracer = os.path.realpath(os.path.join(args.bin_dir, "gpuos-trace"))
    work = args.keep or tempfile.mkdtemp(prefix="gpuos-phase-overhead.")
    os.makedirs(work, exist_ok=True)
    try:
        if args.marks_toggle_ms:
            phases, steps, result = record_launched_phases(args, tracer, work)
        else:
            job = Job(args, work)
            try:
                job.wait_warm()
                phases = record_phases(args, tracer, job, work)
            finally:
                result = job.stop()
            steps = job.steps()
        summarize(args, phases, steps, result)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bin_dir", nargs="?", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--phase-seconds", type=float, default=3)
    parser.add_argument("--margin", type=float, default=0.3, help="attached phases: seconds left out at each end")
    parser.add_argument("--variants", default="os")
    parser.add_argument("--model", choices=["mlp", "resnet18"], default="mlp")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--pin", default="")
    parser.add_argument("--toggle-ms", type=int, default=0)
    parser.add_argument("--marks-toggle-ms", type=int, default=0)
    parser.add_argument("--tracer-pin", default="",
                        help="with --marks-toggle-ms: run the tracer (not the job) on these CPUs")
    parser.add_argument("--toggle-margin", type=float, default=0.02,
                        help="seconds left out at each end of a toggled span")
    parser.add_argument("--verbose", action="store_true", help="with a toggle: a row per span")
    parser.add_argument("--keep", default="", help="keep the step log and traces in this folder")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("need --rounds >= 1")
    if not args.toggle_ms and args.phase_seconds <= 2 * args.margin:
        parser.error("need --phase-seconds > 2 x --margin")
    if args.toggle_ms and args.marks_toggle_ms:
        parser.error("give one of --toggle-ms and --marks-toggle-ms")
    toggle_ms = args.toggle_ms or args.marks_toggle_ms
    if toggle_ms and toggle_ms <= 2000 * args.toggle_margin:
        parser.error("need a toggle period > 2 x --toggle-margin")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
