#!/usr/bin/env python3
"""Issue 3's PyTorch check, run on the GPU machine.

Two modes of one small training script with DataLoader worker processes
and NVTX "step N" ranges:

  torch_step_check.py train [--steps N]            the script itself (run it
                                                    under gpuos-trace)
  torch_step_check.py profile [--steps N]          the same steps under
                                                    torch.profiler; prints the
                                                    kernels per step it saw
  torch_step_check.py compare TRACE.jsonl PROFILE.txt
                                                    kernels per step in the
                                                    gpuos-trace dump vs the
                                                    profiler's count

Every step ends with torch.cuda.synchronize(), so each step's kernels are
launched and finished inside its range, and the per-step count is exact.
"""
import argparse
import json
import re
import sys


def build(args):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.batch * (args.steps + 4), 256),
                         torch.randint(0, 10, (args.batch * (args.steps + 4),)))
    loader = DataLoader(data, batch_size=args.batch, num_workers=2, pin_memory=True)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return torch, loader, model, opt


def one_step(torch, model, opt, x, y):
    x = x.cuda(non_blocking=True)
    y = y.cuda(non_blocking=True)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()


def train(args):
    torch, loader, model, opt = build(args)
    it = iter(loader)
    for i in range(args.steps):
        x, y = next(it)
        torch.cuda.nvtx.range_push(f"step {i}")
        one_step(torch, model, opt, x, y)
        torch.cuda.nvtx.range_pop()
    print(f"train: steps={args.steps}")


def profile(args):
    torch, loader, model, opt = build(args)
    from torch.profiler import ProfilerActivity, profile as torch_profile
    it = iter(loader)
    # The same warm steps as the traced run, outside the profiler.
    warm = 2
    for i in range(warm):
        x, y = next(it)
        one_step(torch, model, opt, x, y)
    measured = args.steps - warm
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(measured):
            x, y = next(it)
            one_step(torch, model, opt, x, y)
    kernels = 0
    by_name = {}
    for event in prof.events():
        # GPU-side user annotations ("Optimizer.step#SGD.step") are ranges the
        # profiler projects onto the GPU timeline, not kernels.
        if re.match(r"^[\w.]+#[\w.]+$", event.name):
            continue
        if str(event.device_type).endswith("CUDA") and not event.name.startswith(("Memcpy", "Memset")):
            kernels += 1
            by_name[event.name] = by_name.get(event.name, 0) + 1
    print(json.dumps({"profiled_steps": measured, "kernels": kernels,
                      "kernels_per_step": kernels / measured if measured else 0,
                      "by_name": by_name}))


def compare(args):
    api_ts = {}      # (pid, correlation) -> launch call start
    kernels = []     # (pid, correlation)
    steps = []       # (start, end) of "step N" ranges
    with open(args.trace) as f:
        for line in f:
            record = json.loads(line)
            event = record.get("event")
            if not event:
                continue
            pid = event.get("pid", 0)
            if "cuda_api" in event:
                api = event["cuda_api"]
                api_ts[(pid, api.get("correlation_id", 0))] = int(event["ts_ns"])
            elif "gpu_kernel" in event:
                kernels.append(((pid, event["gpu_kernel"].get("correlation_id", 0)),
                                event["gpu_kernel"].get("name", "")))
            elif "nvtx_range" in event and event["nvtx_range"].get("name", "").startswith("step "):
                start = int(event["ts_ns"])
                steps.append((start, start + int(event["nvtx_range"].get("duration_ns", 0))))
    steps.sort()
    per_step = [0] * len(steps)
    names = {}  # kernel name -> count over the compared steps
    unmatched = 0
    for key, name in kernels:
        ts = api_ts.get(key)
        if ts is None:
            unmatched += 1
            continue
        for i, (start, end) in enumerate(steps):
            if start <= ts <= end:
                per_step[i] += 1
                if i >= 2:
                    names[name] = names.get(name, 0) + 1
                break
    with open(args.profile) as f:
        prof = json.loads(f.read().strip().splitlines()[-1])
    expected = prof["kernels_per_step"]
    # The profiler saw the steps after the first two; compare the same ones.
    measured = per_step[2:]
    ok = bool(measured) and all(n == expected for n in measured)
    # Where the two disagree, by kernel name (per step), for the record.
    theirs = {n: c / prof["profiled_steps"] for n, c in prof.get("by_name", {}).items()}
    ours = {n: c / max(1, len(measured)) for n, c in names.items()}
    differ = {n: [ours.get(n, 0), theirs.get(n, 0)] for n in set(ours) | set(theirs)
              if abs(ours.get(n, 0) - theirs.get(n, 0)) > 1e-9}
    print(json.dumps({"differ_by_name_ours_theirs": differ}))
    print(json.dumps({"gpuos_kernels_per_step": per_step, "profiler_kernels_per_step": expected,
                      "kernels_without_launch_call": unmatched, "match": ok}))
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    for name in ("train", "profile"):
        p = sub.add_parser(name)
        p.add_argument("--steps", type=int, default=12)
        p.add_argument("--batch", type=int, default=64)
    c = sub.add_parser("compare")
    c.add_argument("trace")
    c.add_argument("profile")
    args = parser.parse_args()
    if args.mode == "train":
        train(args)
    elif args.mode == "profile":
        profile(args)
    else:
        return compare(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
