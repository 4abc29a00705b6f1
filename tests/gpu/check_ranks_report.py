#!/usr/bin/env python3
"""Checks the per-rank part of a multi-rank trace's report (issue 23):
every rank found with its number, world size, GPU, its own steps and
communication, and the straggler the job was made to have (or none).
With --dump, counts each rank process's kernels and NCCL kernels from
`gpuos-trace dump` and, with --nccl, wants NCCL kernels on every rank.
Prints one line per rank, then "LABEL: PASS ..." or "LABEL: FAIL ..." last.
  check_ranks_report.py --label L --report REPORT.json [--dump DUMP.jsonl]
      --world N [--straggler R|none] [--nccl] [--min-steps S] [--job-rc RC]
Standard library only (the bare GPU machine).
"""

import argparse
import collections
import json
import sys

from check_known_work import num, payload_of, read_events


def kernels_by_pid(dump):
    kernels, nccl = collections.Counter(), collections.Counter()
    for event in read_events(dump):
        kind, payload = payload_of(event)
        if kind == "gpu_kernel":
            pid = num(event, "pid")
            kernels[pid] += 1
            if payload.get("name", "").startswith(("ncclDevKernel", "ncclKernel")):
                nccl[pid] += 1
    return kernels, nccl


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label", required=True)
    p.add_argument("--report", required=True, help="gpuos-trace report --format json")
    p.add_argument("--dump", help="gpuos-trace dump (JSON lines), for kernel counts")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--straggler", default="none", help="the rank made slow, or none")
    p.add_argument("--nccl", action="store_true", help="NCCL kernels wanted on every rank")
    p.add_argument("--min-steps", type=int, default=10)
    p.add_argument("--job-rc", type=int, default=0)
    args = p.parse_args()
    fails = []
    if args.job_rc != 0:
        fails.append("job rc=%d" % args.job_rc)
    try:
        report = json.load(open(args.report))
    except (OSError, ValueError) as e:
        print("%s: FAIL no report (%s)" % (args.label, e))
        return 1
    kernels, nccl = kernels_by_pid(args.dump) if args.dump else ({}, {})
    ranks = report.get("ranks", [])
    if sorted(r["rank"] for r in ranks) != list(range(args.world)):
        fails.append("ranks %s, want 0..%d" % ([r["rank"] for r in ranks], args.world - 1))
    gpus = set()
    for r in ranks:
        name = "rank %s" % r["rank"]
        if r["world_size"] != args.world:
            fails.append("%s: world size %s" % (name, r["world_size"]))
        if r["gpu"] is None:
            fails.append("%s: no gpu" % name)
        gpus.add(r["gpu"])
        if r["steps"] < args.min_steps:
            fails.append("%s: %d steps" % (name, r["steps"]))
        if r.get("gpu_idle_ns") is None:
            fails.append("%s: no GPU work" % name)
        if r["comm_ns"] <= 0:
            fails.append("%s: no communication" % name)
        if args.nccl and args.dump and nccl.get(r["pid"], 0) == 0:
            fails.append("%s: no NCCL kernels" % name)
        print("  rank %d/%d pid %d gpu %s: %d steps, step %.1f ms (p95 %.1f), comm %.1f ms, exposed %.1f ms, "
              "data wait %.1f ms, GPU idle %s, kernels %s (NCCL %s)" % (
                  r["rank"], r["world_size"], r["pid"], r["gpu"], r["steps"], r["step_ns"]["mean"] / 1e6,
                  r["step_ns"]["p95"] / 1e6, r["comm_ns"] / 1e6, r["exposed_comm_ns"] / 1e6,
                  r["data_wait_ns"] / 1e6,
                  "-" if r.get("gpu_idle_ns") is None else "%.1f ms" % (r["gpu_idle_ns"] / 1e6),
                  kernels.get(r["pid"], "-"), nccl.get(r["pid"], "-")))
    if args.nccl and len(gpus) < min(args.world, 2):
        fails.append("ranks share GPUs %s" % sorted(g for g in gpus if g is not None))
    s = report.get("straggler")
    if args.straggler == "none":
        if s:
            fails.append("straggler rank %s named in a balanced job" % s["rank"])
    elif not s or s["rank"] != int(args.straggler):
        fails.append("straggler %s, want rank %s" % (s and s["rank"], args.straggler))
    detail = "straggler " + ("rank %d, %s, %.1f ms a step to every other rank" % (
        s["rank"], s["cause"], s["cost_ns_per_step"] / 1e6) if s else "none")
    print("%s: %s %s" % (args.label, "FAIL " + ", ".join(fails) + ";" if fails else "PASS", detail))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
