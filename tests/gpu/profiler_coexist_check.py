#!/usr/bin/env python3
"""A job that starts torch.profiler while gpuos-trace records it (issue 3,
point 4): the profiler must still see its kernels (the shim steps aside when
Kineto subscribes to CUPTI), and the job carries on.

  profiler_coexist_check.py            prints {"before", "profiler_kernels"}
  profiler_coexist_check.py check DUMP.jsonl RESULT.json
                                        checks the gpuos-trace side
"""
import json
import re
import sys


def job():
    import torch
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(512, 512, device="cuda")
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            y = x @ x
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if str(e.device_type).endswith("CUDA")
               and not e.name.startswith(("Memcpy", "Memset"))
               and not re.match(r"^[\w.]+#[\w.]+$", e.name)]
    for _ in range(10):  # the job goes on after its profiler
        y = x @ x
    torch.cuda.synchronize()
    print(json.dumps({"profiler_kernels": len(kernels)}))


def check(dump, result):
    ours = 0
    status = ""
    for line in open(dump):
        event = json.loads(line).get("event", {})
        if "gpu_kernel" in event:
            ours += 1
        if "shim_stats" in event:
            status = event["shim_stats"].get("cupti_status", "")
    theirs = json.loads(open(result).read().strip().splitlines()[-1])["profiler_kernels"]
    ok = theirs >= 20 and ours >= 50 and "stepped aside" in status
    print(json.dumps({"gpuos_kernels": ours, "profiler_kernels": theirs, "shim_status": status,
                      "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    job()
