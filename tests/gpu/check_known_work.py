#!/usr/bin/env python3
"""Checks a gpuos-trace recording of tests/gpu/cuda_known_work against what
the program says it did (its KNOWN_WORK_EXPECT line): exact counts, bytes
and memory kinds of the CUDA events, and the clock invariants that tie GPU
activity to the API calls that caused it.  Prints a PASS/FAIL table last
and exits 1 on any FAIL.

Input events: one JSON object per line, as `gpuos-trace dump` writes them
({"event": {...}}, with "header" and "trailer" lines around them; a bare
event object per line is read too), named like proto/gpuos_trace.proto
(ts_ns, pid, tid, gpu_kernel{...}).
Proto3 JSON habits are accepted: 64-bit numbers as strings, enums as names
or numbers, default values left out, lowerCamelCase or snake_case keys.
Standard library only: it runs on the bare GPU machine.
"""

import argparse
import collections
import json
import re
import sys

MEMCPY_DIRECTIONS = ["MEMCPY_UNKNOWN", "MEMCPY_HTOD", "MEMCPY_DTOH", "MEMCPY_HTOA",
                     "MEMCPY_ATOH", "MEMCPY_ATOA", "MEMCPY_ATOD", "MEMCPY_DTOA",
                     "MEMCPY_DTOD", "MEMCPY_HTOH", "MEMCPY_PTOP"]
MEMORY_KINDS = ["MEMORY_UNKNOWN", "MEMORY_PAGEABLE", "MEMORY_PINNED", "MEMORY_DEVICE",
                "MEMORY_ARRAY", "MEMORY_MANAGED", "MEMORY_DEVICE_STATIC",
                "MEMORY_MANAGED_STATIC"]
SYNC_KINDS = ["UNKNOWN", "EVENT", "STREAM_WAIT_EVENT", "STREAM", "CONTEXT"]
# Which API call each kind of synchronisation record comes from.
SYNC_API = {"CONTEXT": "cudaDeviceSynchronize", "STREAM": "cudaStreamSynchronize",
            "EVENT": "cudaEventSynchronize"}
CUDA_PAYLOADS = ("cuda_api", "gpu_kernel", "gpu_memcpy", "gpu_memset", "gpu_sync")


def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def normalise(value):
    if isinstance(value, dict):
        return {snake(k): normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def num(message, field):
    """A numeric field, 0 when absent (proto3 leaves defaults out)."""
    value = message.get(field, 0)
    return int(value) if value not in (None, "") else 0


def enum(message, field, names):
    value = message.get(field, names[0])
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        index = int(value)
        return names[index] if index < len(names) else str(index)
    return value


def boolean(message, field):
    value = message.get(field, False)
    return value is True or value == "true"


def end_ns(event, payload):
    return num(event, "ts_ns") + num(payload, "duration_ns")


class Checks:
    def __init__(self):
        self.rows = []

    def add(self, name, expected, got, ok=None, detail=""):
        if ok is None:
            ok = expected == got
        self.rows.append((name, str(expected), str(got), ok, detail))

    def print_table(self):
        width = max(len(r[0]) for r in self.rows)
        ewidth = min(30, max(len(r[1]) for r in self.rows))
        gwidth = min(30, max(len(r[2]) for r in self.rows))
        for name, _, _, ok, detail in self.rows:
            if not ok and detail:
                print(f"  FAIL detail, {name}: {detail}")
        print()
        print(f"{'check':<{width}}  {'expected':>{ewidth}}  {'got':>{gwidth}}  result")
        for name, expected, got, ok, _ in self.rows:
            print(f"{name:<{width}}  {expected:>{ewidth}}  {got:>{gwidth}}  "
                  f"{'PASS' if ok else 'FAIL'}")
        failed = sum(1 for r in self.rows if not r[3])
        print(f"\n{len(self.rows) - failed} passed, {failed} failed")
        return failed == 0


def read_expectations(path):
    with open(path) as f:
        for line in f:
            if line.startswith("KNOWN_WORK_EXPECT "):
                return json.loads(line[len("KNOWN_WORK_EXPECT "):])
    return None


def read_events(path):
    events = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = normalise(json.loads(line))
            except json.JSONDecodeError as error:
                sys.exit(f"{path}:{number}: not JSON: {error}")
            if "event" in record:
                events.append(record["event"])
            elif "header" not in record and "trailer" not in record:
                events.append(record)
    return events


def payload_of(event):
    for name in CUDA_PAYLOADS + ("nvtx_range", "shim_stats"):
        if name in event:
            return name, event[name]
    return None, None


def check(expect, events, tolerance_ns):
    c = Checks()
    pid = expect["pid"]
    mib = expect["bytes"]
    by_kind = collections.defaultdict(list)
    for event in events:
        kind, payload = payload_of(event)
        if kind is not None and num(event, "pid") == pid:
            by_kind[kind].append((event, payload))
    apis = by_kind["cuda_api"]
    kernels = by_kind["gpu_kernel"]
    copies = by_kind["gpu_memcpy"]
    sets = by_kind["gpu_memset"]
    syncs = by_kind["gpu_sync"]

    # --- counts -----------------------------------------------------------
    names = collections.Counter(p.get("name", "") for _, p in kernels)
    for name, count in expect["kernels"].items():
        c.add(f"kernels named {name}", count, names.get(name, 0))
    c.add("kernels in total", sum(expect["kernels"].values()), len(kernels),
          detail=f"names seen: {dict(names)}")

    shapes = collections.Counter(
        (enum(p, "direction", MEMCPY_DIRECTIONS), enum(p, "src_kind", MEMORY_KINDS),
         enum(p, "dst_kind", MEMORY_KINDS), boolean(p, "async")) for _, p in copies)
    for want in expect["memcpy"]:
        key = (want["direction"], want["src"], want["dst"], want["async"])
        label = (f"memcpy {want['direction'][7:]} {want['src'][7:].lower()}->"
                 f"{want['dst'][7:].lower()}{' async' if want['async'] else ''}")
        c.add(label, want["count"], shapes.get(key, 0))
    total_copies = sum(w["count"] for w in expect["memcpy"])
    c.add("memcpy in total", total_copies, len(copies),
          detail=f"shapes seen: {dict(shapes)}")
    wrong_bytes = [num(p, "bytes") for _, p in copies if num(p, "bytes") != mib]
    c.add("memcpy bytes (each 1 MiB, total)", total_copies * mib,
          sum(num(p, "bytes") for _, p in copies), ok=not wrong_bytes and len(copies) == total_copies,
          detail=f"sizes other than {mib}: {wrong_bytes[:5]}")

    set_shapes = collections.Counter((num(p, "value"), boolean(p, "async"), num(p, "bytes"),
                                      enum(p, "memory_kind", MEMORY_KINDS)) for _, p in sets)
    for want in expect["memset"]:
        key = (want["value"], want["async"], mib, "MEMORY_DEVICE")
        c.add(f"memset value {want['value']}{' async' if want['async'] else ''} 1 MiB device",
              want["count"], set_shapes.get(key, 0), detail=f"seen: {dict(set_shapes)}")
    c.add("memset in total", sum(w["count"] for w in expect["memset"]), len(sets))

    sync_kinds = collections.Counter(enum(p, "kind", SYNC_KINDS) for _, p in syncs)
    for kind, count in expect["sync"].items():
        c.add(f"sync records {kind}", count, sync_kinds.get(kind, 0),
              detail=f"seen: {dict(sync_kinds)}")

    runtime = [(e, p) for e, p in apis if not boolean(p, "driver")]
    api_names = collections.Counter(p.get("name", "") for _, p in runtime)
    for name, count in expect["api"].items():
        if name == "LaunchKernel":
            got = sum(v for k, v in api_names.items() if "LaunchKernel" in k)
            c.add("runtime API *LaunchKernel*", count, got,
                  detail=f"launch names: { {k: v for k, v in api_names.items() if 'Launch' in k} }")
        else:
            c.add(f"runtime API {name}", count, api_names.get(name, 0))
    present = {name: api_names[name] for name in expect["api_absent"] if api_names.get(name)}
    c.add("untraced APIs absent", "{}", str(present), ok=not present)
    driver_calls = len(apis) - len(runtime)
    c.add("driver API calls (info: none made directly)", "-", driver_calls, ok=True)
    wrong_tid = [num(e, "tid") for e, _ in runtime if num(e, "tid") != expect["tid"]]
    c.add("API calls on the main thread's tid", expect["tid"],
          "all" if not wrong_tid else f"{len(wrong_tid)} others", ok=not wrong_tid,
          detail=f"tids seen: {sorted(set(wrong_tid))[:5]}")

    ranges = collections.Counter(p.get("name", "") for _, p in by_kind["nvtx_range"])
    for name in expect["nvtx"]:
        c.add(f"NVTX range {name}", 1, ranges.get(name, 0))

    c.add("fork child exit status", 0, expect["fork_child_status"])
    stats = [p for _, p in by_kind["shim_stats"]]
    if stats:
        last = stats[-1]
        c.add("shim: CUPTI active", True, boolean(last, "cupti_active"),
              detail=str(last.get("cupti_status", "")))
        c.add("shim: CUPTI dropped records", 0, num(last, "cupti_dropped_records"))
        c.add("shim: events dropped (queue, send)", "0, 0",
              f"{num(last, 'dropped_queue_full')}, {num(last, 'dropped_send_failed')}")
    else:
        c.add("shim: ShimStats present", "yes", "no", ok=False)

    # --- clocks -------------------------------------------------------------
    everything = apis + kernels + copies + sets + syncs
    zero = [e for e, _ in everything if num(e, "ts_ns") == 0]
    no_duration = [p for _, p in kernels + copies if num(p, "duration_ns") == 0]
    c.add("no zero timestamps", 0, len(zero))
    c.add("kernels and copies have durations", 0, len(no_duration))

    api_by_corr = collections.defaultdict(list)
    for e, p in apis:
        api_by_corr[num(p, "correlation_id")].append((e, p))

    def launch_violations(records, what):
        orphans, early, worst = 0, 0, 0
        for e, p in records:
            calls = api_by_corr.get(num(p, "correlation_id"))
            if not calls:
                orphans += 1
                continue
            latest_start = max(num(a, "ts_ns") for a, _ in calls)
            lead = latest_start - num(e, "ts_ns")
            if lead > tolerance_ns:
                early += 1
                worst = max(worst, lead)
        c.add(f"{what} with an API call of the same correlation id", len(records),
              len(records) - orphans)
        c.add(f"{what} starting before their API call", 0, early,
              detail=f"worst by {worst} ns")

    launch_violations(kernels, "kernels")
    launch_violations(copies, "copies")
    launch_violations(sets, "memsets")

    # Synchronous copies finish inside their call, except pageable HtoD, which
    # may return once the data is staged (CUDA's API sync behaviour).
    def must_finish_inside(direction, src, is_async):
        return not is_async and not (direction == "MEMCPY_HTOD" and src == "MEMORY_PAGEABLE")

    expected_inside = sum(w["count"] for w in expect["memcpy"]
                          if must_finish_inside(w["direction"], w["src"], w["async"]))
    outside, checked, worst = 0, 0, 0
    for e, p in copies:
        if not must_finish_inside(enum(p, "direction", MEMCPY_DIRECTIONS),
                                  enum(p, "src_kind", MEMORY_KINDS), boolean(p, "async")):
            continue
        calls = [(a, q) for a, q in api_by_corr.get(num(p, "correlation_id"), [])
                 if q.get("name", "").startswith("cudaMemcpy")]
        if not calls:
            continue
        checked += 1
        a, q = calls[0]
        over = max(num(a, "ts_ns") - num(e, "ts_ns"), end_ns(e, p) - end_ns(a, q))
        if over > tolerance_ns:
            outside += 1
            worst = max(worst, over)
    c.add("sync copies inside their cudaMemcpy call", expected_inside, checked - outside,
          ok=outside == 0 and checked == expected_inside,
          detail=f"{checked} checked (pinned HtoD, both DtoH), {outside} outside, "
                 f"worst by {worst} ns")

    outside, worst, unmatched = 0, 0, 0
    for e, p in syncs:
        want = SYNC_API.get(enum(p, "kind", SYNC_KINDS))
        calls = [(a, q) for a, q in api_by_corr.get(num(p, "correlation_id"), [])
                 if q.get("name", "") == want]
        if not calls:
            unmatched += 1
            continue
        a, q = calls[0]
        over = max(num(a, "ts_ns") - num(e, "ts_ns"), end_ns(e, p) - end_ns(a, q))
        if over > tolerance_ns:
            outside += 1
            worst = max(worst, over)
    c.add("sync records joined to their API call", len(syncs), len(syncs) - unmatched)
    c.add("sync records inside their API call", 0, outside, detail=f"worst by {worst} ns")

    if runtime:
        first = min(num(e, "ts_ns") for e, _ in runtime)
        last = max(end_ns(e, p) for e, p in runtime)
        stray = [e for e, p in kernels + copies + sets
                 if num(e, "ts_ns") + tolerance_ns < first or end_ns(e, p) > last + tolerance_ns]
        c.add("GPU activity within the process's API span", 0, len(stray))
    return c


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", help="cuda_known_work's stdout")
    parser.add_argument("--events", help="JSONL from gpuos-trace dump")
    parser.add_argument("--tolerance-ns", type=int, default=0,
                        help="slack allowed in the clock invariants (default 0: exact)")
    parser.add_argument("--step", action="append", default=[],
                        help="NAME=EXPECTED=GOT: a step run_gpu_checks.sh ran, shown first "
                             "in the table (PASS when EXPECTED equals GOT, or EXPECTED is '-')")
    args = parser.parse_args()

    steps = Checks()
    for step in args.step:
        name, expected, got = step.rsplit("=", 2)
        steps.add(name, expected, got, ok=expected in ("-", got))
    expect = None
    if args.expect:
        try:
            expect = read_expectations(args.expect)
        except OSError as error:
            print(f"cannot read {args.expect}: {error}")
    events = None
    if args.events:
        try:
            events = read_events(args.events)
        except OSError as error:
            print(f"cannot read {args.events}: {error}")
    if expect is None:
        steps.add("KNOWN_WORK_EXPECT line in the program's output", "yes", "no", ok=False)
    if events is None:
        steps.add("events dump readable", "yes", "no", ok=False)
    if expect is not None and events is not None:
        print(f"{len(events)} events read; checking pid {expect['pid']}")
        steps.rows.extend(check(expect, events, args.tolerance_ns).rows)
    return 0 if steps.print_table() else 1


if __name__ == "__main__":
    sys.exit(main())
