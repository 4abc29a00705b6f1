#!/usr/bin/env python3
# One point of the practical guide's num_workers sweep (and of the ECS 251
# data-loading question): a lightweight MLP on MNIST-shaped synthetic data,
# so cheap on the GPU that the DataLoader decides the throughput.  Each run
# takes one --num-workers; run_gpu_suite.sh drives the sweep (0/2/4/8) and
# puts the points side by side.  --preprocess-us adds CPU time per sample,
# as a decode/transform would (gpuos-trainer's option of the same name).
import argparse
import os
import sys

import torch
import torch.utils.data

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import common  # noqa: E402

SCRIPT = "dataloader_sweep"
CLASSES = 10


class SyntheticDigits(torch.utils.data.Dataset):
    """28x28 grey images, learnable like gpuos-trainer's synthetic data: noise
    plus a bright band whose position is the label.  Item i is made from its
    own seeded generator, so any number of workers yields the same batches."""

    def __init__(self, length, seed, preprocess_us):
        self.length = length
        self.seed = seed
        self.preprocess_us = preprocess_us

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        generator = torch.Generator()
        generator.manual_seed(self.seed * 1000003 + index)
        label = int(torch.randint(0, CLASSES, (1,), generator=generator))
        image = torch.rand(1, 28, 28, generator=generator)
        rows = 28 // CLASSES
        image[:, label * rows:(label + 1) * rows, :] += 1.0
        image.sub_(common.MNIST_MEAN).div_(common.MNIST_STD)
        common.burn_cpu_us(image, self.preprocess_us)
        return image, label


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=SCRIPT, description="Lightweight MLP on MNIST-shaped synthetic data: one point "
        "of a DataLoader num_workers sweep.")
    parser.add_argument("--num-workers", type=common.non_negative_int, default=0,
                        help="DataLoader worker processes (default %(default)s)")
    parser.add_argument("--preprocess-us", type=common.non_negative_int, default=0,
                        help="CPU time spent on each sample after it is made, in microseconds")
    parser.add_argument("--hidden", type=common.positive_int, default=512)
    parser.add_argument("--layers", type=common.positive_int, default=2)
    parser.add_argument("--pin-memory", action="store_true",
                        help="pin batches and copy them non_blocking (CUDA only)")
    parser.add_argument("--lr", type=float, default=0.05)
    common.add_common_args(parser, steps=60, warmup=10, batch_size=256)
    args = parser.parse_args(argv)
    common.check_common_args(parser, args)
    device = common.resolve_device(parser, args)
    return args, device


def main(argv):
    args, device = parse_args(argv)
    pin = args.pin_memory and device.type == "cuda"
    if args.pin_memory and not pin:
        common.note(SCRIPT, "no CUDA: --pin-memory is left out")

    torch.manual_seed(args.seed)
    model = common.build_mlp(28 * 28, args.hidden, args.layers, CLASSES).to(device)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    dataset = SyntheticDigits(args.steps * args.batch_size, args.seed, args.preprocess_us)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                                         num_workers=args.num_workers, pin_memory=pin,
                                         drop_last=True)
    annotate = common.Annotator(device, not args.no_annotate)
    clock = common.StepClock(device, args.warmup)
    batches = iter(loader)
    first_loss = None
    loss = None
    for step in range(args.steps):
        clock.begin_step(step)
        with annotate.range("step %d" % step):
            with annotate.range("get batch"), common.GetBatchTimer(clock):
                images, labels = next(batches)
            with annotate.range("copy batch"):
                images = images.to(device, non_blocking=pin)
                labels = labels.to(device, non_blocking=pin)
            with annotate.range("forward"):
                loss = criterion(model(images), labels)
            with annotate.range("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with annotate.range("optimizer step"):
                optimizer.step()
            if step == 0:
                first_loss = loss.detach().clone()
    clock.finish()
    measured = args.steps - args.warmup
    samples_per_s, steps_per_s = common.throughput(clock, measured, args.batch_size)
    common.emit(common.summary_line(
        SCRIPT, "workers%d" % args.num_workers, device, samples_per_s, steps_per_s,
        measured_steps=measured, elapsed_s=clock.elapsed_s, get_batch_s=clock.get_batch_s,
        batch=args.batch_size, steps=args.steps, warmup=args.warmup, workers=args.num_workers,
        preprocess_us=args.preprocess_us, pin_memory=pin, non_blocking=pin, model="mlp",
        hidden=args.hidden, layers=args.layers, params=common.parameter_count(model),
        image="1x28x28", threads=torch.get_num_threads(), seed=args.seed,
        first_loss="%.6f" % float(first_loss), loss="%.6f" % float(loss)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
