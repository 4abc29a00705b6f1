#!/usr/bin/env python3
"""Every kind of gpuos-trace export, loaded in Perfetto's own trace processor
and held to the trace's own counts.

Records (as root, real eBPF) the demo workload, the ground-truth workload
(and its exec from a thread), an NVTX program, a PyTorch job on the CPU
(where Python has torch) and two DDP ranks of it, an attach to a running program with CUDA driver
calls recorded by uprobes (the stand-in libcuda), an attach to a job
started with --prepare (NVTX step ranges through the shim), and writes a
trace with CUDA records as a GPU host delivers them (gpu_trace_fixture); or
takes existing .gpuos files (--trace NAME=FILE, as on the GPU machine).
Exports each as a Perfetto trace and as Chrome JSON, loads both in
trace_processor_shell, runs the queries beside this file and checks:
  stats.sql          no import error, data loss or named info stat
  threads.sql        every process and thread of the report, with its name
  placed_slices.sql  slices per thread / track and name, and their total
                     durations, equal to what `gpuos-trace dump` holds; per
                     thread mmap, munmap, futex waits, NVTX ranges, kernels,
                     copies, memsets and steps equal to `report --format json`
  flows.sql          every flow of the CUDA side joins a CUDA API call to
                     its GPU work (other flows are counted, not checked)
  counters.sql       the counter tracks, by name, each with values
  nesting.sql        slices of a track nest or are apart; none left open
and runs the user queries of docs/trace-processor.md (docs/queries/*.sql) on
the Perfetto export, prints their output and holds them to the report: each
step's kernels, kernel time, GPU idle time and longest idle stretch, each
thread's off-CPU time by cause, the longest munmap call.

The trace processor is not part of the repository: $GPUOS_TRACE_PROCESSOR,
else ../shared/tools/perfetto/trace_processor_shell beside the repository.
Without it (or without root, to record) the check is skipped: exit 77.
"""

import argparse
import collections
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
QUERIES = ["stats", "threads", "placed_slices", "flows", "counters", "nesting"]
USER_QUERIES = ["kernels_per_step", "gpu_idle_per_step", "off_cpu_by_cause", "top_munmap"]
NAMED_STATS = [
    "misplaced_end_event", "track_event_parser_errors", "track_event_tokenizer_errors",
    "track_event_thread_invalid_end", "tokenizer_skipped_packets",
    "track_hierarchy_missing_uuid", "clock_sync_failure", "process_tracker_errors",
]
# Stats that say how long the import took, or (Chrome JSON) that the viewer
# ignores displayTimeUnit, which the legacy chrome://tracing viewer uses.
HARMLESS_STATS = {"guess_trace_type_duration_ns", "parse_trace_duration_ns",
                  "json_display_time_unit"}
JSON_GLOBAL_PID = 0x7FFFFFF0  # the Chrome JSON's process of tracks of no process


def find_trace_processor():
    """The path, or None where there is none; a GPUOS_TRACE_PROCESSOR that
    names nothing runnable is an error, not a reason to skip."""
    named = os.environ.get("GPUOS_TRACE_PROCESSOR")
    if named:
        if not os.access(named, os.X_OK):
            sys.exit(f"GPUOS_TRACE_PROCESSOR={named}: not an executable file")
        return named
    path = os.path.join(os.path.dirname(REPO), "shared", "tools", "perfetto", "trace_processor_shell")
    return path if os.access(path, os.X_OK) else None


def tp_env(tp):
    env = dict(os.environ)
    folder = os.path.dirname(os.path.abspath(tp))
    env["LD_LIBRARY_PATH"] = folder + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


# Columns that hold names: kept as text even where a name looks like a number.
TEXT_COLUMNS = {"name", "idx", "severity", "source", "thread_name", "process_name", "track",
                "step", "thread", "cause", "addr"}


def parse_value(column, text):
    if text == "[NULL]":
        return None
    if column in TEXT_COLUMNS:
        return text
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def run_queries(tp, trace, files, workdir):
    """Runs the SQL files in one load of `trace`; returns (rows per file, seconds)."""
    sql_path = os.path.join(workdir, "queries.sql")
    with open(sql_path, "w") as out:
        for path in files:
            with open(path) as f:
                out.write(f.read().rstrip().rstrip(";") + ";\n")
    started = time.monotonic()
    run = subprocess.run([tp, "-q", sql_path, trace], capture_output=True, text=True,
                         env=tp_env(tp), timeout=600)
    seconds = time.monotonic() - started
    if run.returncode != 0:
        raise RuntimeError(f"trace_processor_shell failed on {trace}: {run.stderr[-2000:]}")
    blocks = run.stdout.strip("\n").split("\n\n")
    if len(blocks) != len(files):
        raise RuntimeError(f"{trace}: {len(files)} queries, {len(blocks)} results:\n{run.stdout[-2000:]}")
    results = []
    for block in blocks:
        rows = list(csv.reader(io.StringIO(block)))
        header, body = rows[0], rows[1:]
        results.append([{k: parse_value(k, v) for k, v in zip(header, row)} for row in body])
    return results, seconds


# ---- What the trace holds: `gpuos-trace dump` and `report --format json` ----

OFF_CPU_CAUSES = {"OFF_CPU_CAUSE_PREEMPTED": "preempted", "OFF_CPU_CAUSE_FUTEX": "futex",
                  "OFF_CPU_CAUSE_SYSCALL": "syscall", "OFF_CPU_CAUSE_PAGE_FAULT": "page fault"}
MEMCPY_NAMES = ["unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD",
                "HtoH", "PtoP"]
SYNC_KINDS = {"EVENT": "event", "STREAM_WAIT_EVENT": "stream wait event", "STREAM": "stream",
              "CONTEXT": "context"}


def cuda_api_display_name(name, driver):
    # Runtime API names lose their version tag (cudaLaunchKernel_v7000).
    if driver:
        return name
    tag = name.rfind("_v")
    if tag <= 0:
        return name
    digits = name[tag + 2:]
    return name[:tag] if len(digits) >= 4 and digits.isdigit() else name


def block_io_name(rwbs):
    # The exporter's BlockIoOperation: an optional F (preflush), then the
    # operation; a lone F is a flush.
    op = 1 if rwbs.startswith("F") else 0
    c = rwbs[op] if op < len(rwbs) else ""
    if c == "R":
        return "disk read"
    if c == "W":
        return "disk write"
    if c in ("D", "E"):
        return "disk discard"
    if op == 1 and c in ("", "N"):
        return "disk flush"
    return "disk I/O"


def block_device_track(io):
    if io.get("dev_name"):
        return "disk " + io["dev_name"]
    dev = int(io.get("dev", 0))
    return f"disk {dev >> 20}:{dev & ((1 << 20) - 1)}"


def memcpy_name(direction):
    if direction is None:
        return "Memcpy unknown"
    for index, short in enumerate(MEMCPY_NAMES):
        if direction == "MEMCPY_" + short.upper():
            return "Memcpy " + short
    return "Memcpy unknown"


def run_tracer(tracer, args):
    """stdout of a gpuos-trace report/dump/export; exit 3 (a damaged trace:
    what could be read was used) is noted, not fatal."""
    run = subprocess.run([tracer] + args, capture_output=True, text=True)
    if run.returncode == 3:
        print(f"note: {args[1]} is damaged; checking what could be read: {run.stderr.strip()[-300:]}")
    elif run.returncode != 0:
        raise RuntimeError(f"gpuos-trace {' '.join(args)} failed ({run.returncode}): {run.stderr[-2000:]}")
    return run.stdout


class Expected:
    """Slices per (pid, tid, track, name): count and total duration, as the
    export places them; plus flows and counter tracks."""

    def __init__(self, tracer, trace):
        self.slices = collections.defaultdict(lambda: [0, 0])
        # (pid, tid before exec) of threads that exec'd: from then on the
        # thread is the process's main thread.  The export keeps what
        # happened before on the tid it had (Perfetto draws threads by tid);
        # the report counts it with the main thread.
        self.exec_aliases = set()
        self.flows = 0
        self.counters = set()  # (pid or 0, name)
        self.marks = collections.Counter()  # NVTX marks by name: instants, not ranges
        self.pids_seen = set()  # in event order, as the exporter sees them
        self.report = json.loads(run_tracer(tracer, ["report", trace, "--format", "json"]))
        dump = run_tracer(tracer, ["dump", trace])
        api_keys = set()
        gpu_keys = []
        header, trailer = {}, {}
        for line in dump.splitlines():
            record = json.loads(line)
            header = record.get("header", header)
            trailer = record.get("trailer", trailer)
            if "event" in record:
                self.add(record["event"], api_keys, gpu_keys)
        self.flows = sum(1 for key in gpu_keys if key in api_keys)
        for step in self.report.get("steps", []):
            self.put(0, 0, "steps", f"step {step['index']}", step["end_ns"] - step["start_ns"])
        attach = header.get("attach")
        if attach is not None:
            start = int(attach.get("start_ns", 0))
            end = int(trailer.get("attach_end_ns", 0)) or max(self.last_ns, start)
            self.put(0, 0, "attach window", "attach window", max(end - start, 0))

    last_ns = 0

    def put(self, pid, tid, track, name, dur):
        entry = self.slices[(pid, tid, track, name)]
        entry[0] += 1
        entry[1] += dur

    def add(self, e, api_keys, gpu_keys):
        pid = e.get("pid", 0)
        self.last_ns = max(self.last_ns, int(e.get("ts_ns", 0)))
        if pid == 0:
            return
        tid = e.get("tid") or pid
        self.pids_seen.add(pid)
        for kind, name in (("mmap", "mmap"), ("munmap", "munmap"), ("futex_wait", "futex wait")):
            if kind in e:
                self.put(pid, tid, "", name, int(e[kind].get("duration_ns", 0)))
        if "off_cpu" in e:
            off = e["off_cpu"]
            cause = OFF_CPU_CAUSES.get(off.get("cause"), "unknown")
            self.put(pid, tid, "", f"off-CPU ({cause})", int(off.get("duration_ns", 0)))
            # A wakeup by a thread of a process already in the trace: an
            # instant on each end of the waker -> wakee arrow (the exporter's
            # EventMapper::EmitWakeup).
            waker = int(off.get("woken_by_tid", 0))
            if (off.get("voluntary") and waker and waker != tid and
                    int(off.get("waker_pid", 0)) in self.pids_seen):
                self.put(int(off["waker_pid"]), waker, "", "wakes", 0)
                self.put(pid, tid, "", "woken", 0)
            self.counters.add((pid, "context switches/s"))
        if "page_faults" in e:
            self.counters.add((pid, "page faults/s"))
        if "nvtx_range" in e:
            r = e["nvtx_range"]
            name = r.get("name") or "(unnamed)"
            if r.get("kind") == "START_END":
                self.put(pid, 0, "NVTX ranges", name, int(r.get("duration_ns", 0)))
            else:
                self.put(pid, tid, "", name, int(r.get("duration_ns", 0)))
        if "nvtx_mark" in e:
            self.marks[e["nvtx_mark"].get("name") or "(unnamed)"] += 1
            self.put(pid, tid, "", e["nvtx_mark"].get("name") or "(unnamed)", 0)
        if "cuda_api" in e:
            c = e["cuda_api"]
            name = cuda_api_display_name(c.get("name", ""), c.get("driver", False)) or "(unnamed)"
            self.put(pid, tid, "", name, int(c.get("duration_ns", 0)))
            if c.get("correlation_id"):
                api_keys.add((pid, c["correlation_id"]))
        for kind in ("gpu_kernel", "gpu_memcpy", "gpu_memset"):
            if kind in e:
                g = e[kind]
                track = (f"GPU {g.get('device', 0)} stream {g.get('stream', 0)} "
                         f"(context {g.get('context', 0)})")
                name = {"gpu_kernel": g.get("name") or "(unnamed)",
                        "gpu_memcpy": memcpy_name(g.get("direction")),
                        "gpu_memset": "Memset"}[kind]
                self.put(pid, 0, track, name, int(g.get("duration_ns", 0)))
                self.counters.add((0, f"GPU {g.get('device', 0)} busy %"))
                if g.get("correlation_id"):
                    gpu_keys.append((pid, g["correlation_id"]))
        if "gpu_sync" in e:
            s = e["gpu_sync"]
            self.put(pid, 0, "CUDA sync waits", f"sync wait ({SYNC_KINDS.get(s.get('kind'), 'unknown')})",
                     int(s.get("duration_ns", 0)))
            if s.get("correlation_id"):
                gpu_keys.append((pid, s["correlation_id"]))
        if "block_io" in e:
            # A request is drawn on its device's track under the issuing
            # thread's process.
            io = e["block_io"]
            self.put(pid, 0, block_device_track(io), block_io_name(io.get("rwbs", "")),
                     int(io.get("duration_ns", 0)))
        if "exec" in e:
            self.put(pid, 0, "(process)", "exec", 0)
            old_tid = e["exec"].get("old_tid", 0)
            if old_tid and old_tid != pid:
                self.exec_aliases.add((pid, old_tid))
        if "process_exit" in e:
            self.put(pid, 0, "(process)", "process exit", 0)


# ---- The checks ------------------------------------------------------------

class Check:
    def __init__(self, label):
        self.label = label
        self.failures = []

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)

    def equal(self, what, got, want):
        self.expect(got == want, f"{what}: trace processor {got}, trace {want}")


def check_stats(c, rows):
    present = {r["name"] for r in rows}
    for name in NAMED_STATS:
        c.expect(name in present, f"stats: no stat named {name} (renamed upstream?)")
    for r in rows:
        if r["value"] and r["name"] not in HARMLESS_STATS:
            c.expect(False, f"stats: {r['name']}[{r['idx']}] ({r['severity']}, {r['source']}) = {r['value']}")


def check_threads(c, rows, report):
    threads = {(r["pid"], r["tid"]): r for r in rows}
    rank_labels = {r["pid"]: (f"rank {r['rank']}/{r['world_size']} " if r.get("world_size") else f"rank {r['rank']} ")
                   for r in report.get("ranks") or []}
    for process in report.get("processes", []):
        pid = process["pid"]
        main = threads.get((pid, pid))
        if main is None and not process.get("threads"):
            c.expect(False, f"process {pid} ({process.get('comm')}) missing")
        for thread in process.get("threads", []):
            row = threads.get((pid, thread["tid"]))
            if row is None:
                c.expect(False, f"thread {pid}/{thread['tid']} ({thread.get('comm')}) missing")
                continue
            c.equal(f"thread {pid}/{thread['tid']} name", row["thread_name"], thread.get("comm", ""))
        names = {r["process_name"] for r in rows if r["pid"] == pid}
        # A rank's process is named "rank R/W comm" (and "[host] ..." in a
        # merged trace).
        expected = rank_labels.get(pid, "") + process.get("comm", "")
        c.expect(expected in names or any(n.startswith("[") and n.endswith("] " + expected) for n in names),
                 f"process {pid}: name {sorted(names)}, report {expected!r}")


def check_slices(c, rows, expected, json_format):
    got = {(r["pid"], r["tid"], r["track"], r["name"]): [r["n"], r["total_dur"]] for r in rows}
    # Steps belong to the step thread's process, or to the whole trace.
    steps = collections.defaultdict(lambda: [0, 0])
    for key in [k for k in got if k[2] == "steps"]:
        value = got.pop(key)
        steps[(0, 0, "steps", key[3])][0] += value[0]
        steps[(0, 0, "steps", key[3])][1] += value[1]
    got.update(steps)
    for key in sorted(set(got) | set(expected.slices), key=str):
        g = got.get(key, [0, 0])
        w = expected.slices.get(key, [0, 0])
        where = f"pid {key[0]} tid {key[1]}" + (f" track {key[2]!r}" if key[2] else "")
        c.equal(f"slices {key[3]!r} on {where}", g[0], w[0])
        # Chrome JSON times are microseconds with three decimals; a double
        # may round each by 1 ns.
        slack = g[0] if json_format else 0
        c.expect(abs((g[1] or 0) - w[1]) <= slack,
                 f"total duration of {key[3]!r} on {where}: trace processor {g[1]}, trace {w[1]}")
    # Against the report itself, which counts a thread that exec'd with the
    # main thread.
    report = expected.report

    def thread_count(pid, tid, name):
        tids = [tid] + [old for p, old in expected.exec_aliases if p == pid and tid == pid]
        return sum(got.get((pid, t, "", name), [0])[0] for t in tids)

    for process in report.get("processes", []):
        for thread in process.get("threads", []):
            pid, tid = process["pid"], thread["tid"]
            for field, name in (("mmap", "mmap"), ("munmap", "munmap"), ("futex_wait", "futex wait")):
                c.equal(f"report {field} calls of {pid}/{tid}", thread_count(pid, tid, name),
                        thread[field]["calls"])
    cuda = report.get("cuda") or {}
    gpu = [(k, v) for k, v in got.items() if k[2].startswith("GPU ")]
    c.equal("report kernels", sum(v[0] for k, v in gpu if not k[3].startswith(("Memcpy ", "Memset"))),
            (cuda.get("kernels") or {}).get("count", 0))
    c.equal("report memcpys", sum(v[0] for k, v in gpu if k[3].startswith("Memcpy ")),
            sum(m["count"] for m in cuda.get("memcpy", [])))
    c.equal("report memsets", sum(v[0] for k, v in gpu if k[3] == "Memset"),
            (cuda.get("memset") or {}).get("count", 0))
    c.equal("report steps", sum(v[0] for k, v in got.items() if k[2] == "steps"),
            len(report.get("steps", [])))
    nvtx = collections.Counter()
    for r in report.get("nvtx", []):
        nvtx[r["name"] or "(unnamed)"] += r["count"]
    for name, count in nvtx.items():
        # The report counts ranges; a mark of the same name (the backward
        # uprobe's "autograd.backward") is a slice of that name too.
        c.equal(f"report NVTX ranges {name!r}",
                sum(v[0] for k, v in got.items() if k[3] == name and k[2] in ("", "NVTX ranges"))
                - expected.marks[name],
                count)


def check_flows(c, rows, expected):
    r = rows[0]
    c.equal("flows", r["flows"], expected.flows)
    c.equal("flows joining a CUDA API call to its GPU work", r["launch_to_gpu"], expected.flows)
    c.equal("GPU work with a flow", r["gpu_work_with_flow"], expected.flows)
    c.equal("GPU work with several flows", r["gpu_work_with_several"], 0)


def check_counters(c, rows, expected, json_format):
    got = collections.Counter()
    for r in rows:
        name = r["name"]
        if json_format:
            c.expect(name.endswith(" value"), f"counter {name!r}: not the JSON importer's '<name> value'")
            name = name[: -len(" value")]
        pid = 0 if r["pid"] == JSON_GLOBAL_PID else r["pid"]
        got[(pid, name)] += 1
        c.expect(r["n_values"] > 0, f"counter {name!r} of pid {pid}: no values")
    c.equal("counter tracks", sorted(got), sorted(expected.counters))
    c.expect(all(n == 1 for n in got.values()), f"counter tracks named twice: {got}")


def check_nesting(c, rows):
    r = rows[0]
    for field in ("child_outside_parent", "sibling_overlaps", "unfinished"):
        c.equal(f"slices {field}", r[field], 0)


def near(got, want_ns, unit_ns, digits, terms=1):
    """got: the query's value in units of unit_ns, rounded to `digits`
    decimals (a sum of `terms` such values)."""
    return got is not None and abs(got * unit_ns - want_ns) <= terms * unit_ns * 10 ** -digits / 2 + 1


def check_user_queries(c, results, report, exec_aliases):
    kernels, idle, off_cpu, munmap = results
    steps = {f"step {s['index']}": s for s in report.get("steps", [])}
    c.equal("kernels_per_step.sql steps", sorted(r["step"] for r in kernels), sorted(steps))
    for r in kernels:
        s = steps.get(r["step"])
        if s is None:
            continue
        c.equal(f"kernels_per_step.sql {r['step']} kernels", r["kernels"], s["counts"]["kernels"])
        c.expect(near(r["kernel_ms"], s["breakdown"]["gpu_kernel_sum"], 1e6, 3),
                 f"kernels_per_step.sql {r['step']} kernel_ms {r['kernel_ms']}, report "
                 f"gpu_kernel_sum {s['breakdown']['gpu_kernel_sum']} ns")
    for r in idle:
        s = steps.get(r["step"])
        if s is None:
            continue
        c.expect(near(r["gpu_idle_ms"], s["breakdown"]["gpu_idle"], 1e6, 3),
                 f"gpu_idle_per_step.sql {r['step']} gpu_idle_ms {r['gpu_idle_ms']}, report "
                 f"gpu_idle {s['breakdown']['gpu_idle']} ns")
        if s["counts"].get("kernels"):
            c.expect(near(r["longest_idle_ms"], s["counts"]["longest_gpu_idle_ns"], 1e6, 3),
                     f"gpu_idle_per_step.sql {r['step']} longest_idle_ms {r['longest_idle_ms']}, "
                     f"report longest_gpu_idle_ns {s['counts']['longest_gpu_idle_ns']}")
    got, terms = {}, collections.Counter()
    for r in off_cpu:
        tid = r["pid"] if (r["pid"], r["tid"]) in exec_aliases else r["tid"]
        key = (r["pid"], tid, r["cause"])
        got[key] = got.get(key, 0) + r["off_cpu_ms"]
        terms[key] += 1
    for process in report.get("processes", []):
        for thread in process.get("threads", []):
            for cause, ns in thread.get("off_cpu_by_cause_ns", {}).items():
                key = (process["pid"], thread["tid"], cause.replace("_", " "))
                if ns or key in got:
                    c.expect(near(got.get(key), ns, 1e6, 3, max(terms[key], 1)),
                             f"off_cpu_by_cause.sql {key}: {got.get(key)} ms, report {ns} ns")
    longest = max((t["munmap"]["max_ns"] for p in report.get("processes", [])
                   for t in p.get("threads", [])), default=0)
    if longest:
        c.expect(bool(munmap) and near(munmap[0]["dur_us"], longest, 1e3, 1),
                 f"top_munmap.sql: longest {munmap[0]['dur_us'] if munmap else None} us, "
                 f"report {longest} ns")
    else:
        c.equal("top_munmap.sql rows", len(munmap), 0)


def check_export(tp, tracer, label, gpuos, workdir, summary):
    expected = Expected(tracer, gpuos)
    base = os.path.join(workdir, label)
    run_tracer(tracer, ["export", gpuos, "-o", base + ".pftrace", "--format", "json"])
    failures = 0
    files = [os.path.join(HERE, q + ".sql") for q in QUERIES]
    for path, json_format in ((base + ".pftrace", False), (base + ".json", True)):
        c = Check(f"{label} ({'Chrome JSON' if json_format else 'Perfetto'})")
        user = [] if json_format else [os.path.join(REPO, "docs", "queries", q + ".sql")
                                       for q in USER_QUERIES]
        results, seconds = run_queries(tp, path, files + user, workdir)
        stats, threads, placed, flows, counters, nesting = results[: len(QUERIES)]
        check_stats(c, stats)
        check_threads(c, threads, expected.report)
        check_slices(c, placed, expected, json_format)
        check_flows(c, flows, expected)
        check_counters(c, counters, expected, json_format)
        check_nesting(c, nesting)
        if user:
            check_user_queries(c, results[len(QUERIES):], expected.report, expected.exec_aliases)
        slices = sum(r["n"] for r in placed)
        status = "ok" if not c.failures else f"{len(c.failures)} FAILED"
        print(f"{c.label}: {os.path.getsize(path)} bytes, loaded and queried in {seconds:.2f} s; "
              f"{len(threads)} threads, {slices} slices, {flows[0]['flows']} CUDA flows, "
              f"{flows[0]['other_flows']} other flows, "
              f"{len(counters)} counter tracks; stats: "
              + (", ".join(f"{r['name']}={r['value']}" for r in stats if r["value"]) or "none")
              + f": {status}")
        for message in c.failures[:40]:
            print("  " + message)
        if len(c.failures) > 40:
            print(f"  ... and {len(c.failures) - 40} more")
        failures += len(c.failures)
        for path_sql, rows in zip(user, results[len(QUERIES):]):
            print(f"  -- docs/queries/{os.path.basename(path_sql)}")
            print_rows(rows[:12], "    ")
            if len(rows) > 12:
                print(f"    ({len(rows) - 12} more rows)")
        summary.append((c.label, len(c.failures)))
    return failures


def print_rows(rows, indent):
    if not rows:
        print(indent + "(no rows)")
        return
    keys = list(rows[0].keys())
    cells = [[("" if r[k] is None else (f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k])))
              for k in keys] for r in rows]
    widths = [max(len(k), *(len(row[i]) for row in cells)) for i, k in enumerate(keys)]
    print(indent + "  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for row in cells:
        print(indent + "  ".join(v.ljust(w) for v, w in zip(row, widths)))


# ---- Recording the traces --------------------------------------------------

def record(tracer, out, argv, timeout=120):
    run = subprocess.run([tracer, "-q", "-o", out, "--"] + argv, capture_output=True, text=True,
                         timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"recording {argv[0]} failed ({run.returncode}): {run.stderr[-2000:]}")


def wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def record_attach(tracer, workloads, out, workdir):
    """gpuos-trace --pid --no-inject on a running program whose CUDA driver
    calls (the stand-in libcuda) the uprobes record."""
    caller_out = os.path.join(workdir, "caller.out")
    with open(caller_out, "w") as sink:
        caller = subprocess.Popen([os.path.join(workloads, "uprobe_cuda_caller"),
                                   os.path.join(workloads, "fake_cuda", "libcuda.so.1"), "calls", "1"],
                                  stdout=sink, stderr=subprocess.STDOUT)
    text = lambda: open(caller_out).read()
    tracer_proc = None
    try:
        if not wait_for(lambda: "ready" in text(), 20):
            raise RuntimeError("uprobe_cuda_caller did not start: " + text()[-500:])
        tracer_proc = subprocess.Popen([tracer, "-o", out, "--pid", str(caller.pid), "--no-inject"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not wait_for(lambda: os.path.exists(out) and os.path.getsize(out) > 300, 20):
            raise RuntimeError("gpuos-trace --pid wrote nothing")
        time.sleep(0.5)  # the uprobes go in after the header
        caller.send_signal(signal.SIGUSR1)
        if not wait_for(lambda: "done 0" in text(), 20):
            raise RuntimeError("uprobe_cuda_caller's round did not finish")
        tracer_proc.send_signal(signal.SIGINT)
        _, err = tracer_proc.communicate(timeout=30)
        if tracer_proc.returncode != 0:
            raise RuntimeError(f"gpuos-trace --pid failed: {err[-2000:]}")
        caller.wait(timeout=20)
    finally:
        for proc in (tracer_proc, caller):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def record_attach_prepared(tracer, workloads, out, workdir):
    """gpuos-trace --pid on a job started with --prepare: the shim in it is
    switched on for the window, with the job's NVTX step ranges."""
    job = subprocess.Popen([tracer, "--prepare", "--", os.path.join(workloads, "nvtx_step_loop"),
                            "--log", os.path.join(workdir, "nvtx_step_loop.log"), "--seconds", "20"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def shim_loaded():
            try:
                return "libgpuos_shim.so" in open(f"/proc/{job.pid}/maps").read()
            except OSError:
                return False
        if not wait_for(shim_loaded, 20):
            raise RuntimeError("the prepared job did not load the shim")
        time.sleep(0.3)
        run = subprocess.run([tracer, "-q", "--pid", str(job.pid), "--duration", "1s", "-o", out],
                             capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            raise RuntimeError(f"gpuos-trace --pid (prepared) failed: {run.stderr[-2000:]}")
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def record_all(args, workdir):
    tracer, workloads = args.tracer, args.workloads
    traces = []

    def path(name):
        return os.path.join(workdir, name + ".gpuos")

    if args.trainer and os.access(args.trainer, os.X_OK):
        record(tracer, path("demo"), [args.trainer, "--device", "cpu", "--model", "mlp", "--steps", "6",
                                      "--warmup", "1", "--batch-size", "32", "--workers", "2"])
        traces.append(("demo", path("demo")))
    else:
        print("note: no gpuos-trainer (LibTorch) built: the demo trace is left out, as deploy/demo.sh "
              "falls back to the ground-truth workload")
    record(tracer, path("ground_truth"), [
        os.path.join(workloads, "ground_truth"), "--threads", "2", "--workers", "2",
        "--worker-threads", "1", "--mmaps", "20", "--mmap-bytes", "65536", "--futex-waits", "5",
        "--futex-timeout-us", "1000", "--futex-wakes", "3", "--touch-pages", "50", "--sleeps", "5",
        "--sleep-us", "1000", "--exec", "--report", os.path.join(workdir, "ground_truth.report")])
    traces.append(("ground_truth", path("ground_truth")))
    # exec from a thread that is not the main thread: the thread takes the
    # process's pid as its tid.
    record(tracer, path("ground_truth_exec_thread"), [
        os.path.join(workloads, "ground_truth"), "--threads", "2", "--workers", "0",
        "--reexec", "thread", "--mmaps", "5", "--futex-waits", "2", "--futex-timeout-us", "1000",
        "--report", os.path.join(workdir, "ground_truth_exec_thread.report")])
    traces.append(("ground_truth_exec_thread", path("ground_truth_exec_thread")))
    nvtx = os.path.join(workloads, "nvtx_program")
    if os.access(nvtx, os.X_OK):
        record(tracer, path("nvtx"), [nvtx, "--steps", "7", "--sleep-us", "3000"])
        traces.append(("nvtx", path("nvtx")))
    else:
        print("note: nvtx_program not built (no NVTX headers): the NVTX trace is left out")
    # A PyTorch job on the CPU: DataLoader worker processes, steps from the
    # Python hooks' marks (what the GPU session records with --device cuda).
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
        record(tracer, path("pytorch_cpu"), [
            python, os.path.join(REPO, "workloads", "python", "resnet_data_pipeline.py"), "--device",
            "cpu", "--variant", "workers", "--steps", "4", "--warmup", "1", "--image-size", "32",
            "--batch-size", "4", "--num-workers", "2"], timeout=300)
        traces.append(("pytorch_cpu", path("pytorch_cpu")))
        # Two DDP ranks (gloo): processes named "rank R/W comm".
        ddp = os.path.join(REPO, "workloads", "ddp")
        record(tracer, path("ddp_ranks"), [
            python, os.path.join(ddp, "launch_ranks.py"), "--nproc", "2", "--",
            os.path.join(ddp, "train_ddp.py"), "--steps", "6"], timeout=300)
        traces.append(("ddp_ranks", path("ddp_ranks")))
    else:
        print(f"note: {python} has no torch: the PyTorch trace is left out")
    record_attach(tracer, workloads, path("attach_uprobes"), workdir)
    traces.append(("attach_uprobes", path("attach_uprobes")))
    if os.access(os.path.join(workloads, "nvtx_step_loop"), os.X_OK):
        record_attach_prepared(tracer, workloads, path("attach_prepared"), workdir)
        traces.append(("attach_prepared", path("attach_prepared")))
    run = subprocess.run([args.fixture, path("cuda_records")], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"gpu_trace_fixture failed: {run.stderr}")
    traces.append(("cuda_records", path("cuda_records")))
    return traces


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracer", required=True, help="the gpuos-trace binary")
    parser.add_argument("--workloads", help="the build's tests/workloads folder (to record)")
    parser.add_argument("--fixture", help="the gpu_trace_fixture binary (to record)")
    parser.add_argument("--trainer", help="the gpuos-trainer binary (the demo workload)")
    parser.add_argument("--trace", action="append", default=[], metavar="NAME=FILE",
                        help="check these .gpuos files instead of recording")
    parser.add_argument("--keep", metavar="DIR", help="write the traces and exports here and keep them")
    args = parser.parse_args()

    tp = find_trace_processor()
    if tp is None:
        print("SKIPPED: Perfetto's trace processor not found: set GPUOS_TRACE_PROCESSOR or put it at "
              "../shared/tools/perfetto/trace_processor_shell beside the repository")
        return SKIP
    version = subprocess.run([tp, "--version"], capture_output=True, text=True, env=tp_env(tp))
    print(f"trace processor: {tp}: {version.stdout.strip().splitlines()[0] if version.stdout else '?'}")
    if not args.trace and os.geteuid() != 0:
        print("SKIPPED: recording needs root (eBPF)")
        return SKIP

    workdir = args.keep or tempfile.mkdtemp(prefix="gpuos-tp-")
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    try:
        if args.trace:
            traces = [tuple(t.split("=", 1)) for t in args.trace]
        else:
            traces = record_all(args, workdir)
        failures = 0
        summary = []
        for label, gpuos in traces:
            try:
                failures += check_export(tp, args.tracer, label, gpuos, workdir, summary)
            except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as error:
                # One trace that cannot be read or exported must not hide the others.
                detail = getattr(error, "stderr", None) or error
                print(f"{label}: cannot check {gpuos}: {str(detail).strip()[-500:]}")
                summary.append((label, 1))
                failures += 1
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", workdir])
    print(f"{len(summary)} exports checked in {time.monotonic() - started:.1f} s: "
          + ("all clean" if failures == 0 else f"{failures} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
