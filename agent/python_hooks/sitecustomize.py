# gpuos-trace's Python start-up hook.  gpuos-trace puts this directory first
# on PYTHONPATH of the traced command (unless --no-python-hooks), so that a
# PyTorch script without NVTX annotations still shows its training steps:
# every DataLoader batch fetch becomes a "DataLoader fetch" range, every
# iterator made of a DataLoader (an epoch's start: its workers started, or
# waited for to start again) a "DataLoader iter" range, every
# optimizer step an "optimizer.step" range ("optimizer.step#2", #3, ... for
# the second, third optimizer stepping in the process: a GAN steps two an
# iteration; a GradScaler's step(optimizer), which skips the optimizer's
# where gradients overflowed, is its optimizer's range) and every loss.backward() (through torch.autograd.backward) an
# "autograd.backward" range, in the NVTX domain "gpuos.python", recorded by
# the gpuos-trace shim that is preloaded into the process; and a process
# whose init_process_group returns states its rank (a "torch.distributed
# RANK=..." range).  Nothing here may break the script: any failure leaves
# it untouched.  An existing sitecustomize further down sys.path still runs.
import os
import sys


def _chain_next_sitecustomize():
    """Runs the sitecustomize this one shadows, if any."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_gpuos_chained_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


def _shim_ranges():
    # The C extension beside this file (gpuos_marks.c) where it loads: a
    # ctypes call costs several times more, twice a backward pass and twice
    # an optimizer step.
    try:
        import _gpuos_marks
        return _gpuos_marks.push, _gpuos_marks.pop
    except ImportError:
        pass
    # PyDLL, not CDLL: a CDLL call lets go of the GIL, and getting it back
    # can mean waiting for another Python thread (a DataLoader's
    # pin-memory thread) for up to the switch interval, 5 ms, at every
    # mark.  The shim's push and pop never block and never need the GIL.
    import ctypes
    lib = ctypes.PyDLL(None)
    push = lib.gpuos_shim_python_push
    pop = lib.gpuos_shim_python_pop
    push.argtypes = [ctypes.c_char_p]
    push.restype = ctypes.c_int
    pop.argtypes = []
    pop.restype = ctypes.c_int
    return push, pop


# torch.compiler.is_compiling once torch.compiler is imported: while
# torch.compile traces a wrapped call, the wrapper calls straight through
# (a call into the shim is nothing Dynamo can trace: a graph break, and an
# error under fullgraph=True).  A list, so that Dynamo reads it as a
# constant.
_compiling = [None]


def _note_compiler(module):
    if _compiling[0] is None:
        _compiling[0] = getattr(module, "is_compiling", None)


def _ranged(push, pop, name, fn):
    """fn, wrapped to run inside an NVTX range named `name`."""
    import functools
    label = name.encode()

    compiling = _compiling

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if compiling[0] is not None and compiling[0]():
            return fn(*args, **kwargs)
        push(label)
        try:
            return fn(*args, **kwargs)
        finally:
            pop()
    wrapper._gpuos_wrapped = True
    return wrapper


def _patch_dataloader(ranged, module):
    cls = getattr(module, "_BaseDataLoaderIter", None)
    if cls is not None and not getattr(cls.__next__, "_gpuos_wrapped", False):
        cls.__next__ = ranged("DataLoader fetch", cls.__next__)
    # iter(loader) forks the workers, or (persistent_workers) waits for them
    # to start again: the loop waits for data there too, once an epoch.
    loader = getattr(module, "DataLoader", None)
    if loader is not None and not getattr(loader.__iter__, "_gpuos_wrapped", False):
        loader.__iter__ = ranged("DataLoader iter", loader.__iter__)


def _optimizer_labels():
    """label(optimizer): the range name of an optimizer's steps.  Optimizers
    are numbered in the order they first step, a number going back to the
    pool when its optimizer is collected, so that a loop that makes a new
    optimizer every epoch (or every step) keeps "optimizer.step" and only
    optimizers alive together are told apart (the analysis' rule for them:
    cupti_shim/optimizer_step_cycle.h)."""
    import heapq
    import threading
    import weakref
    labels = {}   # id(optimizer) -> label, while it lives
    free = []     # numbers given back, smallest first
    count = [0]
    # Re-entrant: a finalizer (release) may run inside label() on the same
    # thread, when a collection happens there.
    lock = threading.RLock()

    def release(key, number):
        with lock:
            labels.pop(key, None)
            heapq.heappush(free, number)

    def label(optimizer):
        key = id(optimizer)
        found = labels.get(key)
        if found is not None:
            return found
        with lock:
            found = labels.get(key)
            if found is not None:
                return found
            number = heapq.heappop(free) if free else count[0] + 1
            count[0] = max(count[0], number)
            found = b"optimizer.step" if number == 1 else b"optimizer.step#%d" % number
            try:
                weakref.finalize(optimizer, release, key, number)
            except TypeError:
                heapq.heappush(free, number)
                found = b"optimizer.step"  # not weakly referable: not told apart
            labels[key] = found
            return found
    return label


def _optimizer_step_marks(push, pop):
    """ranged_step(step, optimizer_of): `step` wrapped to run inside the
    range of the optimizer that optimizer_of(self, args) names."""
    import functools
    import threading
    label = _optimizer_labels()
    # An optimizer whose step calls another's (a wrapper: Accelerate's
    # AcceleratedOptimizer, a subclass calling super().step(); a
    # GradScaler's step) makes one range, the outer one.  [0] outside a
    # marked step, [1] inside.
    marking = threading.local()

    compiling = _compiling

    def ranged_step(step, optimizer_of):
        @functools.wraps(step)
        def wrapper(self, *args, **kwargs):
            if compiling[0] is not None and compiling[0]():
                return step(self, *args, **kwargs)
            state = getattr(marking, "state", None)
            if state is None:
                state = marking.state = [0]
            if state[0]:
                return step(self, *args, **kwargs)
            try:
                name = label(optimizer_of(self, args))
            except Exception:
                name = b"optimizer.step"
            push(name)
            state[0] = 1
            try:
                return step(self, *args, **kwargs)
            finally:
                state[0] = 0
                pop()
        wrapper._gpuos_wrapped = True
        return wrapper
    return ranged_step


def _patch_grad_scaler(ranged_step, module):
    # scaler.step(optimizer) skips optimizer.step() where the gradients
    # overflowed (mixed precision's first iterations, now and then later):
    # the iteration still ran, so its range is the scaler's step, named for
    # its optimizer.
    cls = getattr(module, "GradScaler", None)
    step = cls.__dict__.get("step") if cls is not None else None
    if step is not None and not getattr(step, "_gpuos_wrapped", False):
        cls.step = ranged_step(step, lambda scaler, args: args[0])


def _patch_optimizers(ranged_step, module):
    base = getattr(module, "Optimizer", None)
    if base is None:
        return

    def own(optimizer, args):
        return optimizer

    def wrap_class(cls):
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_gpuos_wrapped", False):
            cls.step = ranged_step(step, own)

    # Optimizers defined later (torch.optim.SGD, user classes) are
    # wrapped as they are created.
    previous = base.__dict__.get("__init_subclass__")

    @classmethod
    def init_subclass(cls, **kwargs):
        if previous is not None:
            previous.__func__(cls, **kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        wrap_class(cls)
    base.__init_subclass__ = init_subclass
    for cls in list(base.__subclasses__()):
        wrap_class(cls)


def _patch_autograd(push, pop, module):
    # Tensor.backward() calls torch.autograd.backward() by attribute, so
    # wrapping the module's function marks both.  Only the loop's own
    # call is marked: not one nested in a backward pass (reentrant
    # checkpointing), on this thread or on an autograd engine thread
    # (a thread Python did not start).
    import functools
    backward = getattr(module, "backward", None)
    if backward is None or getattr(backward, "_gpuos_wrapped", False):
        return
    label = b"autograd.backward"
    import threading  # not at start-up: a script may monkey-patch it first (gevent)
    marking = threading.local()
    foreign = getattr(threading, "_DummyThread", ())

    # Per thread, one list read at every call (a thread-local attribute
    # costs more than a list item): [0] while no marked backward runs on
    # the thread, [1] inside one, [2] on a thread Python did not start.
    IDLE, INSIDE, FOREIGN = 0, 1, 2

    compiling = _compiling

    @functools.wraps(backward)
    def wrapper(*args, **kwargs):
        if compiling[0] is not None and compiling[0]():
            return backward(*args, **kwargs)
        state = getattr(marking, "state", None)
        if state is None:
            state = marking.state = [FOREIGN if isinstance(threading.current_thread(), foreign) else IDLE]
        if state[0] != IDLE:
            return backward(*args, **kwargs)
        push(label)
        state[0] = INSIDE
        try:
            return backward(*args, **kwargs)
        finally:
            state[0] = IDLE
            pop()
    wrapper._gpuos_wrapped = True
    module.backward = wrapper


def _patch_distributed(push, pop, module):
    # A rank started without torchrun's variables (torch.multiprocessing.spawn
    # passes the rank as an argument) says which it is once its process
    # group is up, in the variables' own words: the recording reads this
    # range's name as it reads /proc/PID/environ
    # (agent/record/rank_environment.h).
    import functools
    init = getattr(module, "init_process_group", None)
    if init is None or getattr(init, "_gpuos_wrapped", False):
        return

    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        result = init(*args, **kwargs)
        try:
            fields = ["RANK=%d" % module.get_rank(), "WORLD_SIZE=%d" % module.get_world_size()]
            for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                         "CUDA_VISIBLE_DEVICES"):
                value = os.environ.get(name)
                if value and " " not in value and "=" not in value and len(value) < 256:
                    fields.append("%s=%s" % (name, value))
            push(("torch.distributed " + " ".join(fields)).encode())
            pop()
        except Exception:
            pass
        return result
    wrapper._gpuos_wrapped = True
    module.init_process_group = wrapper


def _patching_finder(patches):
    """A meta path finder that runs patches[name](module) right after the
    module `name` is executed, wherever it is found."""
    import importlib.abc

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname not in patches:
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    loader = spec.loader
                    original = loader.exec_module

                    def exec_module(module, _original=original, _name=fullname):
                        _original(module)
                        try:
                            patches[_name](module)
                        except Exception:
                            pass
                    loader.exec_module = exec_module
                    return spec
            return None

    return Finder()


def _install():
    # A launched trace, or a job started with `gpuos-trace --prepare` (the
    # shim drops the ranges until an attach switches it on).
    if not (os.environ.get("GPUOS_SHIM_SOCKET") or os.environ.get("GPUOS_SHIM_PREPARED") == "1"):
        return
    try:
        push, pop = _shim_ranges()
    except (OSError, AttributeError):
        return  # the shim is not in this process
    import functools
    ranged = functools.partial(_ranged, push, pop)
    ranged_step = _optimizer_step_marks(push, pop)
    patches = {
        "torch.utils.data.dataloader": functools.partial(_patch_dataloader, ranged),
        "torch.optim.optimizer": functools.partial(_patch_optimizers, ranged_step),
        "torch.amp.grad_scaler": functools.partial(_patch_grad_scaler, ranged_step),
        "torch.cuda.amp.grad_scaler": functools.partial(_patch_grad_scaler, ranged_step),
        "torch.autograd": functools.partial(_patch_autograd, push, pop),
        "torch.distributed.distributed_c10d": functools.partial(_patch_distributed, push, pop),
        "torch.compiler": _note_compiler,
    }
    sys.meta_path.insert(0, _patching_finder(patches))


try:
    _install()
except Exception:
    pass
try:
    _chain_next_sitecustomize()
except Exception:
    pass
