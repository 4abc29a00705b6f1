"""The corpus harness's multi-rank rows (check_corpus.py): a script started
as several ranks on this host, each printing its own "[rank R] ..." lines,
checked rank by rank against the report's "ranks" table.

A spec with "ranks": N is started by a launcher ("launcher": "env", the
default: torchrun's variables set for each rank by
workloads/ddp/launch_ranks.py, or torchrun itself where GPUOS_CORPUS_TORCHRUN
names it; "spawn": the script's own --spawn N, torch.multiprocessing.spawn,
whose ranks are in no environment variable).  Checks per row, beside
check_corpus.py's run/l=a/a=u:
  ranks      the report names every rank 0..N-1 with world size N; ranks
             started by spawn are named only where the Python hook ran (the
             launched mode): without it the report must name none rather
             than guess
  steps      every named rank has steps from its own work (not fixed
             windows), at least 3 measured; unnamed, the report's own steps
  thread     every named rank's steps are on its main thread (the scripts
             train there); unnamed, the report's steps are on the main
             thread of one of the ranks
  own        every named rank's mean step is within 5% of that rank's own
             mean iteration time (attached: its lines inside the window);
             unnamed, the report's mean step against rank 0's
  straggler  checked against the ranks' own clocks where they have them:
             each rank's wait in its own sync points per iteration (RESULT's
             sync_wait_ms_per_iter: the ranks ahead wait there for the
             slowest one's all-reduce).  A named straggler must be the rank
             that waited least, by at least half the wait the report
             charges to it; with none named, no rank may have waited less
             than the others' mean by max(2 ms, 20% of its iteration).
             Where the ranks have no such clock (on the CPU, gloo waits
             inside backward; attached, the job prints no RESULT before it
             is stopped), they do the same work: none may be named.
"""
import os
import re

RANK_PREFIX = re.compile(r"^\[rank (\d+)\] (.*)$")
LAUNCH_RANKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "workloads", "ddp", "launch_ranks.py")


def launcher_argv(python, spec, script_argv):
    """The command that starts the ranks of `script_argv` ([python, script, args...])."""
    n = spec["ranks"]
    if spec.get("launcher", "env") == "spawn":
        return script_argv + ["--spawn", str(n)]
    torchrun = os.environ.get("GPUOS_CORPUS_TORCHRUN")
    if torchrun:
        return torchrun.split() + ["--standalone", "--nproc-per-node", str(n)] + script_argv[1:]
    return [python, LAUNCH_RANKS, "--nproc", str(n), "--"] + script_argv[1:]


def lines_by_rank(lines):
    """{rank: [(monotonic_ns, text without the prefix)]} of the job's stdout."""
    out = {}
    for stamp, text in lines:
        m = RANK_PREFIX.match(text)
        if m:
            out.setdefault(int(m.group(1)), []).append((stamp, m.group(2)))
    return out


def expects_ranks(spec, mode):
    """Whether the report must name the ranks in this mode."""
    return spec.get("launcher", "env") != "spawn" or mode == "launched"


def check(row, spec, fail_top_level):
    """The per-rank checks of a finished row; fail_top_level(row) runs the
    single-process checks on the report's own steps (ranks not named)."""
    n = spec["ranks"]
    ranks = row.report.get("ranks") or []
    named = {r.get("rank"): r for r in ranks}
    want = list(range(n))
    if expects_ranks(spec, row.mode):
        if sorted(k for k in named if k is not None) != want or len(ranks) != n:
            row.fail("ranks", "ranks %s named, %s wanted" % (sorted(named, key=str), want))
    elif ranks and sorted(k for k in named if k is not None) != want:
        row.fail("ranks", "ranks %s named where none can be known (%s), or all of %s" % (
            sorted(named, key=str), row.mode, want))
    for r, entry in named.items():
        if entry.get("world_size") != n:
            row.fail("ranks", "rank %s: world size %s, not %d" % (r, entry.get("world_size"), n))
    if not named:
        row.notes.append("no ranks named (%s: %s)" % (row.mode, row.report.get("ranks_note") or "none found"))
        # Unnamed, every rank is still a training process of its own, and
        # one that ran collectives.
        processes = row.report.get("training_processes") or []
        if len(processes) != n or not row.report.get("training_processes_communicate"):
            row.fail("ranks", "unnamed ranks: %d training processes listed (%s collectives), %d wanted with them" % (
                len(processes), "with" if row.report.get("training_processes_communicate") else "without", n))
        fail_top_level(row)
    for r in want:
        entry = named.get(r)
        if entry is None:
            continue
        source, steps = entry.get("step_source"), entry.get("steps") or 0
        if source in ("fixed_windows", "none", None):
            row.fail("steps", "rank %d: %s" % (r, source))
        elif steps < 3:
            row.fail("steps", "rank %d: only %d measured steps (%s)" % (r, steps, source))
        if entry.get("driving_tid") != entry.get("pid"):
            row.fail("thread", "rank %d: steps on tid %s, not its main thread %s" % (
                r, entry.get("driving_tid"), entry.get("pid")))
        own = row.rank_own.get(r)
        mean = (entry.get("step_ns") or {}).get("mean") if steps else None
        if own is None:
            row.fail("own", "rank %d: no own timing" % r)
        elif not mean:
            row.fail("own", "rank %d: no measured steps" % r)
        else:
            err = mean / 1e6 / own - 1
            if abs(err) > 0.05:
                row.fail("own", "rank %d: mean step %.3f ms vs own %.3f ms (%+.1f%%, limit 5%%)" % (
                    r, mean / 1e6, own, 100 * err))
    check_straggler(row, n)


# Sync waits below this (ms a step, on every rank) tell nothing: the ranks
# wait for each other elsewhere (gloo inside backward).
MIN_SYNC_WAIT_MS = 0.05


def own_lateness(row, n):
    """{rank: how much less it waited in its own sync points than the other
    ranks' mean, ms per iteration}, or None where the ranks' own clocks tell
    nothing."""
    waits = row.rank_sync_wait  # CUDA ranks only
    if len(waits) != n or n < 2 or max(waits.values()) < MIN_SYNC_WAIT_MS:
        return None
    return {r: sum(w for q, w in waits.items() if q != r) / (n - 1) - waits[r] for r in waits}


def check_straggler(row, n):
    if not row.report.get("ranks"):
        return  # no ranks named: no straggler can be
    straggler = row.report.get("straggler")
    late = own_lateness(row, n)
    if late is None:
        if straggler:
            row.fail("straggler", "rank %s named (cause %s, %.3f ms a step) in a job whose ranks do the same work" % (
                straggler.get("rank"), straggler.get("cause"), (straggler.get("cost_ns_per_step") or 0) / 1e6))
        return
    own = ", ".join("rank %d %+.3f" % (r, late[r]) for r in sorted(late))
    row.notes.append("ranks' own lateness (the others' mean sync wait less the rank's, ms an iteration): " + own)
    slowest = max(late, key=late.get)
    if straggler:
        named, cost = straggler.get("rank"), (straggler.get("cost_ns_per_step") or 0) / 1e6
        if named != slowest or late[slowest] < 0.5 * cost:
            row.fail("straggler", "rank %s named (cause %s, %.3f ms a step); by the ranks' own sync waits: %s" % (
                named, straggler.get("cause"), cost, own))
        return
    iteration = row.rank_own.get(slowest) or 0
    if late[slowest] >= max(2.0, 0.2 * iteration):
        row.fail("straggler", "none named; by the ranks' own sync waits rank %d held the others back: %s" % (
            slowest, own))


def rank_means(row):
    """{rank: (report's mean step ms, own ms)} for the named ranks with both."""
    out = {}
    for entry in row.report.get("ranks") or [] if row.report else []:
        r, steps = entry.get("rank"), entry.get("steps") or 0
        mean = (entry.get("step_ns") or {}).get("mean")
        if steps and mean and row.rank_own.get(r):
            out[r] = (mean / 1e6, row.rank_own[r])
    return out


def iterations(entry, *not_iterations):
    """A rank's steps (every one, warm-up and left out included) less those
    whose reason says they are no iteration (holds any of `not_iterations`)."""
    steps = entry.get("step_comm") or []
    return len(steps) - sum(1 for st in steps if any(n in (st.get("left_out") or "") for n in not_iterations))


def check_pair(row, ref, check_name, less_work, cut_off):
    """l=a and a=u, rank by rank: the same number of iterations (a=u,
    within 1: all steps, less the row's units of less work than an
    iteration and either run's extra work cut off an iteration) or the
    same mean step over own time (l=a, within 3%)."""
    if check_name == "a=u":
        a = {e.get("rank"): iterations(e, less_work, cut_off) for e in row.report.get("ranks") or []}
        b = {e.get("rank"): iterations(e, cut_off) for e in ref.report.get("ranks") or []}
        for r in sorted(set(a) & set(b), key=str):
            if abs(a[r] - b[r]) > 1:
                row.fail(check_name, "rank %s: %d iterations vs %s's %d" % (r, a[r], ref.mode, b[r]))
        return
    mine, theirs = rank_means(row), rank_means(ref)
    for r in sorted(set(mine) & set(theirs), key=str):
        rel_row, rel_ref = mine[r][0] / mine[r][1], theirs[r][0] / theirs[r][1]
        err = rel_row / rel_ref - 1
        if abs(err) > 0.03:
            row.fail(check_name, "rank %s: mean/own %.3f vs %s's %.3f (%+.1f%%, limit 3%%)" % (
                r, rel_row, ref.mode, rel_ref, 100 * err))
