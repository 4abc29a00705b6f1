#!/usr/bin/env python3
"""What gpuos-trace's Python hook costs each call it wraps when its marks
are off: the wrapper's frame and the two calls into the shim that return at
once (a prepared, detached shim; or marks switched off by
GPUOS_BENCH_MARKS_TOGGLE).  bench/phase_overhead.py --marks-toggle-ms
measures the rest (recording the marks); this is what both of its spans
pay.  Run under the shim, prepared:

  gpuos-trace --prepare -- python3 bench/python_hook_cost.py [--calls N]

Prints ns per call of a no-op function, bare and wrapped the way the hook
wraps autograd.backward and optimizer.step (agent/python_hooks/
sitecustomize.py), best of 7 repeats, and their difference.
"""
import argparse
import sys
import timeit
import types


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200000)
    args = parser.parse_args()
    try:
        import sitecustomize as hook
        push, pop = hook._shim_ranges()
    except (ImportError, AttributeError, OSError) as e:
        raise SystemExit("python_hook_cost: run it under `gpuos-trace --prepare --` (%s)" % e)

    def noop(*args, **kwargs):
        return None

    autograd = types.SimpleNamespace(backward=noop)
    hook._patch_autograd(push, pop, autograd)
    step = hook._ranged(push, pop, "optimizer.step", noop)
    rows = [("bare", noop), ("backward wrapper", autograd.backward), ("optimizer.step wrapper", step)]
    best = {}
    for name, fn in rows:
        best[name] = min(timeit.repeat(lambda: fn(1), number=args.calls, repeat=7)) / args.calls * 1e9
    print("hook calls into the shim through %s" % ("_gpuos_marks" if "_gpuos_marks" in sys.modules else "ctypes"))
    for name, _ in rows:
        extra = "" if name == "bare" else " (+%.0f ns)" % (best[name] - best["bare"])
        print("%-24s %7.0f ns%s" % (name, best[name], extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
