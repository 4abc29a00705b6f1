#!/usr/bin/env python3
"""Checks a recording of tests/gpu/cuda_known_work made with
`gpuos-trace --cuda-records kernel,memcpy`: every kernel and every copy the
program made is there (the same counts as the full check), no record of a
kind left out (API calls, memsets, syncs), and the shim's status says why
they are missing.  Prints a PASS/FAIL table; exits 1 on any FAIL.
  check_cuda_records.py --expect STDOUT --events DUMP.jsonl [--kinds kernel,memcpy]
Standard library only (the bare GPU machine).
"""

import argparse
import collections
import sys

from check_known_work import Checks, num, payload_of, read_events, read_expectations

# Which --cuda-records kind each recorded payload belongs to.
KIND_OF_PAYLOAD = {"gpu_kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
                   "gpu_sync": "sync", "cuda_api": "runtime or driver"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help="cuda_known_work's stdout")
    parser.add_argument("--events", required=True, help="JSONL from gpuos-trace dump")
    parser.add_argument("--kinds", default="kernel,memcpy", help="what --cuda-records named")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    expect = read_expectations(args.expect)
    events = read_events(args.events)
    c = Checks()
    if expect is None:
        c.add("KNOWN_WORK_EXPECT line in the program's output", "yes", "no", ok=False)
        return 0 if c.print_table() else 1
    counts = collections.Counter()
    status = ""
    for event in events:
        kind, payload = payload_of(event)
        if kind in KIND_OF_PAYLOAD and num(event, "pid") == expect["pid"]:
            counts[kind] += 1
        if kind == "shim_stats" and num(event, "pid") == expect["pid"]:
            status = payload.get("cupti_status", payload.get("cuptiStatus", "")) or status
    for payload, kind in KIND_OF_PAYLOAD.items():
        if payload == "gpu_kernel" and "kernel" in kinds:
            c.add("kernels (all kept)", sum(expect["kernels"].values()), counts[payload])
        elif payload == "gpu_memcpy" and "memcpy" in kinds:
            c.add("memcpy (all kept)", sum(w["count"] for w in expect["memcpy"]), counts[payload])
        elif kind.split(" ")[0] not in kinds:
            c.add(f"{payload} records ({kind}: left out)", 0, counts[payload])
    c.add("status names the choice", "yes",
          "yes" if f"only {args.kinds} records" in status else "no", detail=status)
    return 0 if c.print_table() else 1


if __name__ == "__main__":
    sys.exit(main())
