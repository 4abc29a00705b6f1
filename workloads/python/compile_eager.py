#!/usr/bin/env python3
# The ECS 251 kernel-dispatch question: the same MLP training step run
# eagerly (one kernel launch per op, each dispatched by the CPU) and under
# torch.compile (fused kernels; with --mode reduce-overhead also CUDA graphs,
# so a whole step is one replay).  --model small is dispatch-bound, --model
# large (409M parameters, the practical guide's MLP) is compute-bound.
# Batches are made once on the device and cycled, so neither data loading
# nor copies take part.  Prints one line per half, then a summary line whose
# samples_per_s is the compiled half's (the eager half's when torch.compile
# is unavailable, as in PyTorch 1.x: then the compiled half is skipped and
# the summary says compiled=unavailable).
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import common  # noqa: E402

SCRIPT = "compile_eager"
CLASSES = 10
IN_FEATURES = 28 * 28
# (hidden, layers): small has many cheap kernels, large has few expensive ones.
MODELS = {"small": (256, 4), "large": (8192, 7)}
DATA_BATCHES = 4


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=SCRIPT, description="Eager vs torch.compile training steps of a small or a "
        "large MLP.")
    parser.add_argument("--model", choices=tuple(MODELS), default="small")
    parser.add_argument("--mode", choices=("default", "reduce-overhead"), default="default",
                        help="torch.compile mode of the compiled half")
    parser.add_argument("--only", choices=("both", "eager", "compiled"), default="both",
                        help="run one half only")
    parser.add_argument("--hidden", type=common.positive_int, default=None,
                        help="override the model's width (e.g. small values on the CPU)")
    parser.add_argument("--layers", type=common.positive_int, default=None,
                        help="override the model's number of hidden layers")
    parser.add_argument("--lr", type=float, default=0.01)
    common.add_common_args(parser, steps=60, warmup=10, batch_size=128)
    args = parser.parse_args(argv)
    common.check_common_args(parser, args)
    device = common.resolve_device(parser, args)
    hidden, layers = MODELS[args.model]
    args.hidden = args.hidden or hidden
    args.layers = args.layers or layers
    return args, device


def compile_unavailable_reason():
    if not hasattr(torch, "compile"):
        return "torch.compile needs PyTorch 2.0 or later; this is PyTorch %s" % torch.__version__
    return None


def run_half(args, device, compiled):
    """Trains a fresh model (same seed, same weights) for --steps steps.
    Returns (clock, params, loss)."""
    torch.manual_seed(args.seed)
    model = common.build_mlp(IN_FEATURES, args.hidden, args.layers, CLASSES).to(device)
    params = common.parameter_count(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(args.seed)
    data = [(torch.randn(args.batch_size, 1, 28, 28, generator=generator).to(device),
             torch.randint(0, CLASSES, (args.batch_size,), generator=generator).to(device))
            for _ in range(DATA_BATCHES)]
    step_fn = torch.compile(model, mode=args.mode) if compiled else model
    # reduce-overhead's CUDA graphs reuse output memory across replays; marking
    # each step's start tells them the previous step's outputs are dead.
    mark_step = None
    if compiled and hasattr(torch, "compiler") and hasattr(torch.compiler,
                                                            "cudagraph_mark_step_begin"):
        mark_step = torch.compiler.cudagraph_mark_step_begin

    annotate = common.Annotator(device, not args.no_annotate)
    clock = common.StepClock(device, args.warmup)
    loss = None
    last_loss = None
    for step in range(args.steps):
        clock.begin_step(step)
        with annotate.range("step %d" % step):
            with annotate.range("get batch"), common.GetBatchTimer(clock):
                images, labels = data[step % DATA_BATCHES]
            if mark_step is not None:
                mark_step()
            with annotate.range("forward"):
                loss = criterion(step_fn(images), labels)
            with annotate.range("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with annotate.range("optimizer step"):
                optimizer.step()
        if step == args.steps - 1:
            last_loss = float(loss.detach())
    clock.finish()
    return clock, params, last_loss


def main(argv):
    args, device = parse_args(argv)
    reason = compile_unavailable_reason()
    halves = []
    if args.only in ("both", "eager"):
        halves.append("eager")
    if args.only in ("both", "compiled"):
        if reason is None:
            halves.append("compiled")
        else:
            common.note(SCRIPT, "%s: the compiled half is skipped, %s" % (
                reason, "the eager half still runs" if "eager" in halves
                else "and with --only compiled nothing is left to run"))
    if not halves:
        return 1  # --only compiled, and torch.compile is missing (said above)
    measured = args.steps - args.warmup
    results = {}
    params = 0
    for half in halves:
        started = time.perf_counter()
        clock, params, loss = run_half(args, device, compiled=(half == "compiled"))
        samples_per_s, steps_per_s = common.throughput(clock, measured, args.batch_size)
        results[half] = (samples_per_s, steps_per_s, clock, loss)
        common.emit(common.summary_line(
            SCRIPT, half, device, samples_per_s, steps_per_s, measured_steps=measured,
            elapsed_s=clock.elapsed_s, warmup_s=clock.warmup_s,
            total_s=time.perf_counter() - started, batch=args.batch_size, steps=args.steps,
            warmup=args.warmup, model=args.model, mode=args.mode if half == "compiled" else "-",
            hidden=args.hidden, layers=args.layers, params=params, loss="%.6f" % loss))

    # The summary: the compiled half's throughput where there is one.
    headline = "compiled" if "compiled" in results else "eager"
    samples_per_s, steps_per_s, clock, _ = results[headline]
    elapsed_s = clock.elapsed_s
    eager = results.get("eager", (0.0,))[0]
    compiled = results.get("compiled", (0.0,))[0]
    fields = dict(measured_steps=measured, elapsed_s=elapsed_s, batch=args.batch_size,
                  steps=args.steps, warmup=args.warmup, model=args.model, mode=args.mode,
                  hidden=args.hidden, layers=args.layers, params=params,
                  eager_samples_per_s="%.2f" % eager if "eager" in results else "-",
                  compiled_samples_per_s="%.2f" % compiled if "compiled" in results else "-",
                  speedup="%.3f" % (compiled / eager) if eager > 0 and compiled > 0 else "-",
                  compile_warmup_s="%.4f" % results["compiled"][2].warmup_s
                  if "compiled" in results else "-",
                  compiled="yes" if reason is None else "unavailable")
    common.emit(common.summary_line(SCRIPT, "+".join(halves), device, samples_per_s,
                                    steps_per_s, **fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
