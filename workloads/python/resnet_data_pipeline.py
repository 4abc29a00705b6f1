#!/usr/bin/env python3
# The Nsight Systems data-transfer case study (Chaim Rand, "Optimizing Data
# Transfer in AI/ML Workloads") in one script: ResNet-18 trained on synthetic
# 3x512x512 images at batch 64, one optimization per --variant:
#   baseline  DataLoader with num_workers=0 (single-process loading)
#   workers   8 worker processes
#   pinned    8 workers + pin_memory + non_blocking copies
#   prefetch  pinned + a copy stream that copies batch N+1 while step N computes
# Each item costs real CPU work (decoded pixels made by a seeded generator,
# random crop, flip, float conversion, normalization), so "get batch" is the
# bottleneck the article found.  Runs on the CPU with small --image-size for
# testing; the numbers that matter come from --device cuda.
import argparse
import os
import sys

import torch
import torch.utils.data

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import common  # noqa: E402

SCRIPT = "resnet_data_pipeline"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
VARIANTS = ("baseline", "workers", "pinned", "prefetch")


class SyntheticImages(torch.utils.data.Dataset):
    """Item i is the same image whichever process makes it: its own generator,
    seeded from (seed, i).  The "decoded" picture is 1/16 larger than the
    output so that the random crop has room, as a RandomResizedCrop would."""

    def __init__(self, length, image_size, classes, seed):
        self.length = length
        self.size = image_size
        self.margin = max(1, image_size // 16)
        self.classes = classes
        self.seed = seed
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        generator = torch.Generator()
        generator.manual_seed(self.seed * 1000003 + index)
        full = self.size + self.margin
        decoded = torch.randint(0, 256, (3, full, full), generator=generator, dtype=torch.uint8)
        label = int(torch.randint(0, self.classes, (1,), generator=generator))
        top, left, flip = torch.randint(0, self.margin + 1, (3,), generator=generator).tolist()
        image = decoded[:, top:top + self.size, left:left + self.size]
        if flip % 2:
            image = image.flip(2)
        image = image.to(torch.float32).div_(255.0)
        image.sub_(self.mean).div_(self.std)
        return image, label


def make_resnet18(classes):
    import torchvision
    try:
        return torchvision.models.resnet18(weights=None, num_classes=classes)
    except TypeError:  # torchvision before 0.13 has no `weights`
        return torchvision.models.resnet18(pretrained=False, num_classes=classes)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=SCRIPT, description="ResNet-18 on synthetic images: the data-loading and "
        "host-to-device optimizations of the Nsight Systems article, one --variant at a time.")
    parser.add_argument("--variant", choices=VARIANTS, default="baseline")
    parser.add_argument("--num-workers", type=common.non_negative_int, default=None,
                        help="DataLoader workers (default: 0 for baseline, 8 otherwise)")
    parser.add_argument("--image-size", type=common.positive_int, default=512,
                        help="height and width of the square images (default %(default)s)")
    parser.add_argument("--classes", type=common.positive_int, default=1000)
    parser.add_argument("--lr", type=float, default=0.01)
    common.add_common_args(parser, steps=40, warmup=5, batch_size=64)
    args = parser.parse_args(argv)
    common.check_common_args(parser, args)
    device = common.resolve_device(parser, args)
    return args, device


def main(argv):
    args, device = parse_args(argv)
    cuda = device.type == "cuda"
    workers = args.num_workers if args.num_workers is not None else (
        0 if args.variant == "baseline" else 8)
    pin = args.variant in ("pinned", "prefetch")
    if pin and not cuda:
        common.note(SCRIPT, "no CUDA: pin_memory, non_blocking and the copy stream are left out "
                    "(variant %s runs its data path only)" % args.variant)
    pin_memory = pin and cuda
    non_blocking = pin and cuda
    prefetch = args.variant == "prefetch"
    copy_stream = torch.cuda.Stream(device) if prefetch and cuda else None

    torch.manual_seed(args.seed)
    model = make_resnet18(args.classes).to(device)
    model.train()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    dataset = SyntheticImages(args.steps * args.batch_size, args.image_size, args.classes,
                              args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                                         num_workers=workers, pin_memory=pin_memory,
                                         drop_last=True)
    annotate = common.Annotator(device, not args.no_annotate)
    clock = common.StepClock(device, args.warmup)
    batches = iter(loader)

    def copy_batch(batch):
        images, labels = batch
        return (images.to(device, non_blocking=non_blocking),
                labels.to(device, non_blocking=non_blocking))

    def fetch():
        with annotate.range("get batch"), common.GetBatchTimer(clock):
            batch = next(batches)
        with annotate.range("copy batch"):
            if copy_stream is None:
                return copy_batch(batch)
            with torch.cuda.stream(copy_stream):
                return copy_batch(batch)

    pending = None  # prefetch: batch N+1, already copied (or copying) on copy_stream
    loss = None
    for step in range(args.steps):
        clock.begin_step(step)
        with annotate.range("step %d" % step):
            if prefetch:
                # As in the article: step N fetches batch N+1, whose copy
                # overlaps step N's kernels; step 0 fetches batches 0 and 1.
                if pending is None:
                    pending = fetch()
                images, labels = pending
                if copy_stream is not None:
                    compute = torch.cuda.current_stream(device)
                    compute.wait_stream(copy_stream)
                    # Allocated on copy_stream, used on compute: keep the
                    # caching allocator from reusing them too early.
                    images.record_stream(compute)
                    labels.record_stream(compute)
                pending = fetch() if step + 1 < args.steps else None
            else:
                images, labels = fetch()
            with annotate.range("forward"):
                loss = criterion(model(images), labels)
            with annotate.range("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with annotate.range("optimizer step"):
                optimizer.step()
    clock.finish()
    measured = args.steps - args.warmup
    samples_per_s, steps_per_s = common.throughput(clock, measured, args.batch_size)
    common.emit(common.summary_line(
        SCRIPT, args.variant, device, samples_per_s, steps_per_s,
        measured_steps=measured, elapsed_s=clock.elapsed_s, get_batch_s=clock.get_batch_s,
        batch=args.batch_size, steps=args.steps, warmup=args.warmup, workers=workers,
        pin_memory=pin_memory, non_blocking=non_blocking, copy_stream=copy_stream is not None,
        image="3x%dx%d" % (args.image_size, args.image_size), model="resnet18",
        params=common.parameter_count(model), threads=torch.get_num_threads(),
        seed=args.seed, loss="%.6f" % float(loss)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
