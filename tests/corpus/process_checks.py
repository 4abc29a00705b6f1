"""The corpus harness's rows of several training processes that are not
ranks (check_corpus.py, "processes": N in a profile entry): a script whose
processes each run a training loop of their own (hogwild), each printing
"[process P] ..." lines, the first "[process P] pid N", checked process by
process against the report's "training_processes" table.  Checks per row,
beside check_corpus.py's run/l=a/a=u:
  processes  the report lists exactly the job's N training processes (by
             pid), and does not say they ran collectives
  steps      every process has steps from its own work, at least 3 measured
  thread     every process's steps are on its main thread
  own        every process's mean step is within 5% of its own mean
             iteration time (attached: its lines inside the span its steps
             hold, which the report gives as attach_coverage; a window that
             opened while a process stalled holds time no step covers)
The report's own steps (one of the processes) are checked as a
single-process job's for their source and thread; their timing is that
process's row above.  Pairs (l=a, a=u)
go process by process, by P.
"""
import re

import rank_checks

PROCESS_PREFIX = re.compile(r"^\[process (\d+)\] (.*)$")
PID_LINE = re.compile(r"^pid (\d+)$")
OWN_TOLERANCE = 0.05
PAIR_TOLERANCE = 0.03


def lines_by_process(lines):
    """{P: [(monotonic_ns, text without the prefix)]} of the job's stdout."""
    out = {}
    for stamp, text in lines:
        m = PROCESS_PREFIX.match(text)
        if m:
            out.setdefault(int(m.group(1)), []).append((stamp, m.group(2)))
    return out


def pids(lines):
    """{P: pid} from the processes' "pid N" lines."""
    out = {}
    for p, plines in lines_by_process(lines).items():
        for _, text in plines:
            m = PID_LINE.match(text)
            if m:
                out[p] = int(m.group(1))
                break
    return out


def entries_by_index(row):
    """{P: the report's training_processes entry of process P}."""
    by_pid = {e.get("pid"): e for e in (row.report or {}).get("training_processes") or []}
    return {p: by_pid[pid] for p, pid in row.process_pid.items() if pid in by_pid}


def mean_step_ms(row, p, entry):
    """Process P's mean measured step over the iterations its own mean
    covers: launched, from the one after its RESULT's warmup_iters (the
    report's steps begin with the second iteration; processes started
    together contend in their first ones); attached, over its steps inside
    the span its own timing lines cover (where at least 3 are), as for a
    single-process job: a shared machine's speed drifts within the window."""
    warmup = row.process_warmup.get(p)
    steps = entry.get("step_comm") or []
    if warmup and len(steps) > warmup + 2:
        kept = [st["duration_ns"] for st in steps[warmup - 1:] if not st.get("warmup") and not st.get("left_out")]
        if kept:
            return sum(kept) / len(kept) / 1e6
    if entry.get("attach_coverage") and p in row.process_lines:
        # Attached: own_over_steps takes the job's lines over the span the
        # steps hold; the steps are compared over the span those lines cover
        # (a DataLoader restart near the window's end is in the steps, and
        # its line after the window), else whole.
        _, span = lines_in_steps(row, p, entry)
        inside = [st["duration_ns"] for st in steps if span and not st.get("warmup") and not st.get("left_out")
                  and st["start_ns"] >= span[0] and st["start_ns"] + st["duration_ns"] <= span[1]]
        if len(inside) >= 3:
            return sum(inside) / len(inside) / 1e6
        mean = (entry.get("step_ns") or {}).get("mean") if entry.get("steps") else None
        return mean / 1e6 if mean else None
    span = row.process_span.get(p)
    inside = [st["duration_ns"] for st in entry.get("step_comm") or []
              if span and not st.get("warmup") and not st.get("left_out")
              and st["start_ns"] >= span[0] and st["start_ns"] + st["duration_ns"] <= span[1]]
    if len(inside) >= 3:
        return sum(inside) / len(inside) / 1e6
    mean = (entry.get("step_ns") or {}).get("mean") if entry.get("steps") else None
    return mean / 1e6 if mean else None


def lines_in_steps(row, p, entry):
    """Attached: the "ms/iter" figures of process P's lines whose interval
    lies inside the span its steps hold, and the span those intervals cover
    ([], None where there are none)."""
    steps = entry.get("step_comm") or []
    if not steps or not entry.get("attach_coverage") or p not in row.process_lines:
        return [], None
    lo, hi = steps[0]["start_ns"], steps[-1]["start_ns"] + steps[-1]["duration_ns"]
    lines = row.process_lines[p]
    inside = [(t0, t1, ms) for (t0, _), (t1, ms) in zip(lines, lines[1:]) if t0 >= lo and t1 <= hi]
    if not inside:
        return [], None
    return [ms for _, _, ms in inside], (inside[0][0], inside[-1][1])


def own_over_steps(row, p, entry, note=True):
    """Attached: process P's own mean over its timing lines inside the span
    its steps hold (where at least 2 are), and a note of the share of the
    window they hold.  A window that began while a process stalled (its
    DataLoader's workers starting) has time before its first step that no
    figure of the report covers, and says so (attach_coverage); its own
    timing over the whole window counts that time.  Else its own mean."""
    own = row.process_own.get(p)
    coverage = entry.get("attach_coverage")
    inside, _ = lines_in_steps(row, p, entry)
    if not coverage or len(inside) < 2:
        return own
    share = coverage["in_steps_ns"] / coverage["window_ns"] if coverage.get("window_ns") else 0
    if note:
        row.notes.append("process %d: its steps hold %.1f%% of the window; own timing over the %d lines inside "
                         "them" % (p, 100 * share, len(inside)))
    return sum(inside) / len(inside)


def check(row, spec, check_top_level):
    n = spec["processes"]
    entries = row.report.get("training_processes") or []
    listed = sorted(e.get("pid") for e in entries)
    want = sorted(row.process_pid.values())
    if len(row.process_pid) != n:
        row.fail("processes", "the job printed %d process ids, not %d" % (len(row.process_pid), n))
    elif listed != want:
        row.fail("processes", "training processes %s listed, the job's are %s" % (listed, want))
    if row.report.get("training_processes_communicate"):
        row.fail("processes", "said to run collectives; the job's processes run none")
    for p, entry in sorted(entries_by_index(row).items()):
        source, steps = entry.get("step_source"), entry.get("steps") or 0
        if source in ("fixed_windows", "none", None):
            row.fail("steps", "process %d: %s" % (p, source))
        elif steps < 3:
            row.fail("steps", "process %d: only %d measured steps (%s)" % (p, steps, source))
        if entry.get("driving_tid") != entry.get("pid"):
            row.fail("thread", "process %d: steps on tid %s, not its main thread %s" % (
                p, entry.get("driving_tid"), entry.get("pid")))
        own = own_over_steps(row, p, entry)
        mean = mean_step_ms(row, p, entry)
        if own is None:
            row.fail("own", "process %d: no own timing" % p)
        elif not mean:
            row.fail("own", "process %d: no measured steps" % p)
        elif abs(mean / own - 1) > OWN_TOLERANCE:
            row.fail("own", "process %d: mean step %.3f ms vs own %.3f ms (%+.1f%%, limit 5%%)" % (
                p, mean, own, 100 * (mean / own - 1)))
    # The report's own steps are one process's, checked above against its
    # own timing: here only where they were found and on which thread.
    row.own_by_process = True
    check_top_level(row)


def check_pair(row, ref, check_name, less_work, cut_off):
    """l=a: each process's mean step over its own time within 3% of the
    reference's; a=u: each process's iterations (rank_checks.iterations)
    within 1 of the reference's."""
    mine, theirs = entries_by_index(row), entries_by_index(ref)
    for p in sorted(set(mine) & set(theirs)):
        a, b = mine[p], theirs[p]
        if check_name == "a=u":
            ia, ib = rank_checks.iterations(a, less_work, cut_off), rank_checks.iterations(b, cut_off)
            if abs(ia - ib) > 1:
                row.fail(check_name, "process %d: %d iterations vs %s's %d" % (p, ia, ref.mode, ib))
            continue
        ma, mb = mean_step_ms(row, p, a), mean_step_ms(ref, p, b)
        oa, ob = own_over_steps(row, p, a, note=False), own_over_steps(ref, p, b, note=False)
        if not (ma and mb and oa and ob):
            row.fail(check_name, "process %d: a mean step or an own timing is missing" % p)
            continue
        err = (ma / oa) / (mb / ob) - 1
        if abs(err) > PAIR_TOLERANCE:
            row.fail(check_name, "process %d: mean/own %.3f vs %s's %.3f (%+.1f%%, limit 3%%)" % (
                p, ma / oa, ref.mode, mb / ob, 100 * err))
