# Shared pieces of the Python experiment scripts: the common options, the
# NVTX step ranges (named as gpuos-trainer names them, so one report reads
# the same for both), the warm-up/measurement clock and the one-line
# key=value summary that run_gpu_suite.sh parses.  Written for PyTorch 1.13
# (Debian, CPU, where the scripts are tested) up to 2.x with CUDA (where
# they are meant to run): anything newer than 1.13 is looked up with hasattr.
import argparse
import sys
import time

import torch

# MNIST's published mean and standard deviation, as torchvision normalizes
# (the same constants as gpuos-trainer's batch_source.cc).
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


def add_common_args(parser, steps, warmup, batch_size):
    """Adds the options every script shares, with that script's defaults."""
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the model runs; auto: cuda when PyTorch sees a GPU, else cpu")
    parser.add_argument("--steps", type=int, default=steps,
                        help="total training steps, warm-up included (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=warmup,
                        help="first steps left out of the throughput (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=batch_size,
                        help="samples per batch (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of data and weights")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads in the main process (0: leave PyTorch's choice)")
    parser.add_argument("--no-annotate", action="store_true",
                        help="no NVTX ranges (they are only emitted on CUDA anyway)")


def check_common_args(parser, args):
    """Rejects values no run could use; argparse's error() exits with status 2."""
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.warmup < 0 or args.warmup >= args.steps:
        parser.error("--warmup must be at least 0 and less than --steps (%d)" % args.steps)
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if args.threads < 0:
        parser.error("--threads must be at least 0")


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %s" % text)
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be at least 0, got %s" % text)
    return value


def resolve_device(parser, args):
    """Turns --device into a torch.device, or exits 2 when CUDA was asked for but is absent."""
    cuda = torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        parser.error("--device cuda: PyTorch %s sees no CUDA device (built with CUDA: %s)"
                     % (torch.__version__, "yes" if torch.version.cuda else "no"))
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    name = args.device
    if name == "auto":
        name = "cuda" if cuda else "cpu"
    return torch.device(name)


def synchronize(device):
    """Waits for the device's queued work, so that a clock reading means something."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _NoRange:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_RANGE = _NoRange()


class _PushPopRange:
    __slots__ = ("_push", "_pop", "_name")

    def __init__(self, push, pop, name):
        self._push, self._pop, self._name = push, pop, name

    def __enter__(self):
        self._push(self._name)
        return self

    def __exit__(self, *exc):
        self._pop()
        return False


class Annotator:
    """NVTX push/pop ranges through torch.cuda.nvtx, on CUDA only.

    A CPU build of PyTorch has no NVTX library behind torch.cuda.nvtx, and
    on the CPU there is no GPU timeline to line the ranges up with, so there
    (and with --no-annotate) every range is a shared no-op object.
    """

    def __init__(self, device, enabled=True):
        self.enabled = bool(enabled) and device.type == "cuda"
        if self.enabled:
            from torch.cuda import nvtx
            self._push, self._pop = nvtx.range_push, nvtx.range_pop

    def range(self, name):
        if not self.enabled:
            return _NO_RANGE
        return _PushPopRange(self._push, self._pop, name)


class StepClock:
    """Times the steps after the warm-up, between two device synchronizations.

    Mirrors gpuos-trainer: the clock starts when step `warmup` begins (after
    a synchronization, so warm-up work still queued on the GPU is not
    counted) and stops after a final synchronization; "get batch" time is
    summed over the measured steps only.
    """

    def __init__(self, device, warmup):
        self.device = device
        self.warmup = warmup
        self.measuring = False
        self.start = time.perf_counter()
        self.process_start = self.start
        self.warmup_s = 0.0
        self.elapsed_s = 0.0
        self.get_batch_s = 0.0

    def begin_step(self, step):
        if step == self.warmup:
            synchronize(self.device)
            self.start = time.perf_counter()
            self.warmup_s = self.start - self.process_start
            self.measuring = True

    def add_get_batch(self, seconds):
        if self.measuring:
            self.get_batch_s += seconds

    def finish(self):
        synchronize(self.device)
        self.elapsed_s = time.perf_counter() - self.start
        return self.elapsed_s


class GetBatchTimer:
    """`with GetBatchTimer(clock):` adds the block's wall time to clock.get_batch_s."""
    __slots__ = ("_clock", "_t0")

    def __init__(self, clock):
        self._clock = clock

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self._clock.add_get_batch(time.perf_counter() - self._t0)
        return False


def throughput(clock, measured_steps, batch_size):
    """Returns (samples_per_s, steps_per_s) over the measured steps."""
    if clock.elapsed_s <= 0:
        return 0.0, 0.0
    steps_per_s = measured_steps / clock.elapsed_s
    return steps_per_s * batch_size, steps_per_s


def _format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return "%.6g" % value
    # A value never contains a space, so that "key=value" splits on blanks.
    return str(value).replace(" ", "_")


def summary_line(script, variant, device, samples_per_s, steps_per_s, **fields):
    """The last line on stdout, in gpuos-trainer's format:
    `<script>: variant=... device=... samples_per_s=... steps_per_s=... key=value ...`.
    Keys keep their meaning; new ones are appended at the end."""
    parts = ["%s:" % script, "variant=%s" % _format_value(variant),
             "device=%s" % device.type,
             "samples_per_s=%.2f" % samples_per_s, "steps_per_s=%.3f" % steps_per_s]
    for key, value in fields.items():
        if key.endswith("_s") and isinstance(value, float):
            parts.append("%s=%.4f" % (key, value))
        else:
            parts.append("%s=%s" % (key, _format_value(value)))
    return " ".join(parts)


def emit(line):
    """Prints a result line at once (stdout may be a pipe under the suite)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(script, message):
    """One line on stderr, for what the user should know but the table need not show."""
    sys.stderr.write("%s: %s\n" % (script, message))
    sys.stderr.flush()


def build_mlp(in_features, hidden, layers, classes):
    """gpuos-trainer's `mlp`: `layers` Linear+ReLU of width `hidden`, then the classifier.
    hidden=8192, layers=7 on 28x28 inputs is 409M parameters (the practical
    guide's ~400M model)."""
    modules = [torch.nn.Flatten()]
    width = in_features
    for _ in range(layers):
        modules += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    modules.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*modules)


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def burn_cpu_us(sample, microseconds):
    """Spends `microseconds` of this thread's CPU time on real tensor work on
    `sample` (as gpuos-trainer's --preprocess-us does): thread CPU time, not
    wall time, so a preempted data worker does not get its work for free.
    The sample itself is left unchanged."""
    if microseconds <= 0:
        return
    deadline = time.thread_time() + microseconds * 1e-6
    scratch = sample.reshape(-1)
    while time.thread_time() < deadline:
        (scratch * 1.0001 + 0.5).clamp_(0.0, 1.0).sum()
