#!/usr/bin/env python3
# The ECS 251 host-to-device question: how fast do batches cross PCIe from
# pageable vs pinned (page-locked) memory, as many small copies vs few large
# ones, with blocking copies vs non_blocking ones synchronized once at the
# end?  Every case moves the same --total-bytes into one preallocated device
# buffer, so the cases differ only in copy size, memory kind and mode.
# Prints one line per case (GB/s, microseconds per copy), then a summary
# line whose samples_per_s is copies per second over all cases (per-copy
# cost is what a tracer adds to, so run_gpu_suite.sh compares that).
# On the CPU the "device" buffer is host memory and pinned cases are left
# out (pinning needs CUDA): that mode exists to test the script.
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import common  # noqa: E402

SCRIPT = "transfer_bench"
MIB = 1 << 20


def size_arg(text):
    """Bytes, with an optional K/M/G suffix (powers of two)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale != 1 else text
    try:
        value = int(digits) * scale
    except ValueError:
        raise argparse.ArgumentTypeError("not a size (e.g. 256K, 64M): %s" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 byte: %s" % text)
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=SCRIPT, description="Pageable vs pinned host-to-device copies, small vs large, "
        "blocking vs non_blocking; GB/s per case.")
    parser.add_argument("--memory", choices=("all", "pageable", "pinned"), default="all")
    parser.add_argument("--small-bytes", type=size_arg, default=256 << 10,
                        help="size of a small copy (default 256K, about one MNIST batch)")
    parser.add_argument("--large-bytes", type=size_arg, default=64 * MIB,
                        help="size of a large copy (default 64M, about a 512x512 image batch "
                        "of 64 in uint8)")
    parser.add_argument("--total-bytes", type=size_arg, default=None,
                        help="bytes moved per case (default 1G on CUDA, 32M on the CPU)")
    parser.add_argument("--warmup", type=common.non_negative_int, default=3,
                        help="untimed copies before each case")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-annotate", action="store_true")
    args = parser.parse_args(argv)
    if args.threads < 0:
        parser.error("--threads must be at least 0")
    device = common.resolve_device(parser, args)
    if args.total_bytes is None:
        args.total_bytes = (1 << 30) if device.type == "cuda" else 32 * MIB
    if args.small_bytes > args.large_bytes:
        parser.error("--small-bytes (%d) is larger than --large-bytes (%d)"
                     % (args.small_bytes, args.large_bytes))
    return args, device


def run_case(device, memory, mode, nbytes, total_bytes, warmup, annotate):
    """Returns (copies, seconds) for one case."""
    source = torch.empty(nbytes, dtype=torch.uint8)
    source.fill_(1)  # fault the pages in now, not inside the timed copies
    if memory == "pinned":
        source = source.pin_memory()
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    non_blocking = mode == "non_blocking"
    copies = max(1, total_bytes // nbytes)
    with annotate.range("%s %s %d bytes" % (memory, mode, nbytes)):
        for _ in range(warmup):
            target.copy_(source, non_blocking=non_blocking)
        common.synchronize(device)
        start = time.perf_counter()
        for _ in range(copies):
            target.copy_(source, non_blocking=non_blocking)
        common.synchronize(device)
        seconds = time.perf_counter() - start
    return copies, seconds


def main(argv):
    args, device = parse_args(argv)
    memories = ["pageable", "pinned"] if args.memory == "all" else [args.memory]
    if device.type != "cuda" and "pinned" in memories:
        memories.remove("pinned")
        common.note(SCRIPT, "no CUDA: pinned cases are left out (pinning needs a CUDA device)")
    if not memories:
        common.note(SCRIPT, "nothing to measure")
        return 1
    annotate = common.Annotator(device, not args.no_annotate)
    fields = {}
    total_copies = 0
    total_seconds = 0.0
    for memory in memories:
        for mode in ("sync", "non_blocking"):
            for size_name, nbytes in (("small", args.small_bytes), ("large", args.large_bytes)):
                copies, seconds = run_case(device, memory, mode, nbytes, args.total_bytes,
                                           args.warmup, annotate)
                gb_per_s = nbytes * copies / 1e9 / seconds if seconds > 0 else 0.0
                us_per_copy = seconds / copies * 1e6
                common.emit("%s case: memory=%s mode=%s size=%s bytes=%d copies=%d "
                            "elapsed_s=%.4f gb_per_s=%.3f us_per_copy=%.2f"
                            % (SCRIPT, memory, mode, size_name, nbytes, copies, seconds,
                               gb_per_s, us_per_copy))
                fields["%s_%s_%s_gbps" % (memory, mode, size_name)] = "%.3f" % gb_per_s
                total_copies += copies
                total_seconds += seconds
    copies_per_s = total_copies / total_seconds if total_seconds > 0 else 0.0
    common.emit(common.summary_line(
        SCRIPT, args.memory, device, copies_per_s, copies_per_s, measured_steps=total_copies,
        elapsed_s=total_seconds, small_bytes=args.small_bytes, large_bytes=args.large_bytes,
        total_bytes=args.total_bytes, **fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
