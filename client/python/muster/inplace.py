"""muster.torch in place: the survivors' side of a world change, for torch.

    import muster.torch as mt
    mt.init_process_group("nccl")            # instead of dist.init_process_group
    model, opt = build()
    mt.register(model, opt)                  # a process started into a recovered world receives state here
    while mt.iteration() < steps:
        with mt.step():                      # a failed step is discarded, the world rebuilt in place
            train_one_step()

Under `muster run --recovery in-place`, musterd writes each world change
once (muster/world.h); this module follows it for torch:

- init_process_group sets the guard environment before any group exists
  (GUARD_ENV: torch's watchdog then never takes the process down, and its
  dump sleep is cut; only under `muster run`, where the world's watch
  stands in for the watchdog), opens the world and initialises the group of the
  generation this process was started into, over a PrefixStore on the
  native store that no other generation uses.
- A watcher thread waits on the world's watch.  When a new generation
  forms it aborts every NCCL process group before torch's watchdog acts and
  interrupts the training thread with WorldChanged.  (Gloo groups cannot be
  aborted: a gloo collective ends with its peer's closed socket, or at the
  group's timeout, gloo_timeout.)
- step() turns a failed step into a recovery: it destroys the groups, drains
  CUDA under a deadline, takes the next world (new rank and world size),
  re-initialises over the new generation's prefix, re-broadcasts the
  registered parameters, optimizer state and iteration from the new rank 0,
  and runs the on_change callbacks.  The model is rebuilt nowhere.
- A rank whose abort, destroy or drain does not return within
  abort_timeout exits (status EXIT_STUCK): its launcher replaces it.

Without `muster run` (no MUSTER_NODE_ID or MUSTER_GENERATION) it is a plain
dist.init_process_group.  What is set in the environment, and why, is in
docs/launcher.md ("torch in place").
"""

import contextlib
import ctypes
import datetime
import os
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist

from . import _core
from .errors import Stale, Timeout

__all__ = ["GUARD_ENV", "EXIT_STUCK", "WorldChanged", "init_process_group", "register", "step", "recover",
           "iteration", "generation", "on_change", "shutdown"]

#: Set (unless already set) before the first process group: torch's NCCL watchdog must neither abort
#: the process on a peer's death nor sleep 4 x the dump timeout holding the group's lock.
GUARD_ENV = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "100",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
    "TORCH_NCCL_ENABLE_MONITORING": "0",
    "TORCH_NCCL_RETHROW_CUDA_ERRORS": "0",
}

#: The exit status of a rank whose abort or drain did not return within its deadline.
EXIT_STUCK = 75


class WorldChanged(Exception):
    """A new generation formed while this step ran: the step is discarded and the world rebuilt."""


class _NoChange(Exception):
    """No new generation formed within the wait: the failure was not the world's."""


class _State:
    """The process's world: one per process, as torch's default group is."""

    def __init__(self):
        self.world = None
        self.change = None
        self.store = None
        self.backend = None
        self.timeout = None
        self.gloo_timeout = None
        self.abort_timeout = 10.0
        self.change_timeout = 60.0
        self.store_url = None
        self.modules = []
        self.optimizers = []
        self.callbacks = []
        self.iteration = 0
        self.joining = False
        self.lock = threading.Lock()
        self.recovering = False
        self.watcher = None
        self.stop = threading.Event()
        self.main = threading.main_thread().ident


_S = _State()


def _in_place():
    """Whether this process was started by `muster run` (it can follow the world)."""
    return bool(os.environ.get("MUSTER_NODE_ID")) and bool(os.environ.get("MUSTER_GENERATION"))


def _deadline(fn, seconds, what):
    """Run fn on a helper thread; exit the process when it does not return within seconds."""
    done = threading.Event()
    error = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: B902 (reported to the caller)
            error.append(e)
        done.set()

    threading.Thread(target=run, name="muster-" + what, daemon=True).start()
    if not done.wait(seconds):
        sys.stderr.write(f"muster.torch: {what} did not return within {seconds:.1f} s: exiting "
                         f"(status {EXIT_STUCK}) so that the launcher replaces this rank\n")
        sys.stderr.flush()
        os._exit(EXIT_STUCK)
    if error:
        raise error[0]


def _abort_groups():
    """Abort every process group that can be aborted (NCCL), without waiting for peers."""
    abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if not dist.is_initialized():
        return
    if os.environ.get("MUSTER_TORCH_TEST_HANG_ABORT"):
        threading.Event().wait()  # tests: an abort that never returns
    if abort is not None and _S.backend == "nccl":
        abort()


def _interrupt_main():
    """Raise WorldChanged in the training thread at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(_S.main), ctypes.py_object(WorldChanged))


def _clear_interrupt():
    """Drop an interrupt that has not fired yet (the recovery it asked for is under way)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(_S.main), ctypes.py_object())


def _watch():
    """The watcher thread: wait on the world's watch; on a new generation abort and interrupt."""
    while not _S.stop.is_set():
        if not _S.world.wait(200):
            continue
        with _S.lock:
            if _S.recovering or _S.stop.is_set():
                return
            _S.recovering = True
        _deadline(_abort_groups, _S.abort_timeout, "the process groups' abort")
        if _S.backend == "nccl":
            _interrupt_main()
        return


def _start_watcher():
    """Start a watcher for the world just built."""
    _S.stop.clear()
    _S.recovering = False
    _S.watcher = threading.Thread(target=_watch, name="muster-world-watcher", daemon=True)
    _S.watcher.start()


def _stop_watcher():
    """Stop the watcher (it returns within one wait slice)."""
    _S.stop.set()
    if _S.watcher is not None and _S.watcher is not threading.current_thread():
        _S.watcher.join(1.0)
    _S.watcher = None


def _arrive(base, prefix, world):
    """Wait until every rank of the new world is ready to build its group, before the group's own
    rendezvous starts its clock: a survivor that was no neighbour of a dead gloo rank stays in the old
    collective until gloo's op timeout, and the others' rendezvous must not run out meanwhile.  The
    wait is taken in slices; WorldChanged when a newer generation forms during it (a member died)."""
    end = time.monotonic() + _S.change_timeout
    while True:
        try:
            base.client.barrier(prefix + "arrived", world, timeout=0.2)
            return
        except Timeout:
            if _S.world.wait(0):
                raise WorldChanged("a newer generation formed while its group was being built") from None
            if time.monotonic() >= end:
                raise


def _build(change):
    """Initialise the default group of change's world over its generation's own prefix."""
    from .torch import MusterStore
    base = MusterStore(_S.store_url, timeout=_S.timeout)
    prefix = f"{_core.KEY_TORCH_INPLACE_PREFIX}{change['generation']}/"
    _arrive(base, prefix, change["world_size"])
    store = dist.PrefixStore(prefix, base)
    timeout = _S.gloo_timeout if _S.backend == "gloo" else _S.timeout
    # The Python store must outlive the group: torch holds only its C++ half, and a backend that uses the
    # store after init (NCCL's lazy communicator) finds "Not implemented" once the Python object is gone.
    old, _S.store = _S.store, (base, store)
    dist.init_process_group(_S.backend, store=store, rank=change["rank"], world_size=change["world_size"],
                            timeout=timeout)
    _S.change = change
    if old is not None:
        old[0].close()


def init_process_group(backend=None, timeout=None, gloo_timeout=15.0, abort_timeout=10.0, change_timeout=60.0,
                       url=None, **kw):
    """dist.init_process_group for a worker that stays in place across world changes.

    backend: "nccl" with a GPU, else "gloo" (None picks).  timeout: the group's timeout
    (default torch's 30 min; NCCL's errors come from the world, not from it).  gloo_timeout: the
    gloo group's op timeout in seconds: a gloo collective blocked on a peer that is itself blocked
    ends only then.  abort_timeout: seconds an abort, destroy or drain may take before this rank
    exits.  change_timeout: seconds a failed step waits for the world to change before its error
    is taken as the program's own and re-raised.  The three have environment twins that win:
    MUSTER_TORCH_GLOO_TIMEOUT, MUSTER_TORCH_ABORT_TIMEOUT, MUSTER_TORCH_CHANGE_TIMEOUT.  url: the
    store (default $MUSTER_URL).  Other arguments go to dist.init_process_group
    when not started by `muster run`."""
    # Each timeout has an environment twin, for a script run unchanged.
    gloo_timeout = float(os.environ.get("MUSTER_TORCH_GLOO_TIMEOUT", gloo_timeout))
    abort_timeout = float(os.environ.get("MUSTER_TORCH_ABORT_TIMEOUT", abort_timeout))
    change_timeout = float(os.environ.get("MUSTER_TORCH_CHANGE_TIMEOUT", change_timeout))
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not _in_place():
        # No world to follow: torch's own behaviour, watchdog and all (a launcher such as torchrun
        # restarts the job when a rank dies, and needs the survivors to fail rather than wait).
        dist.init_process_group(backend, timeout=timeout or datetime.timedelta(minutes=30), **kw)
        return
    for k, v in GUARD_ENV.items():
        os.environ.setdefault(k, v)
    _S.backend = backend
    _S.timeout = timeout or datetime.timedelta(minutes=30)
    _S.gloo_timeout = datetime.timedelta(seconds=gloo_timeout)
    _S.abort_timeout = abort_timeout
    _S.change_timeout = change_timeout
    _S.store_url = url
    _S.main = threading.current_thread().ident
    _S.world = _core.World(url)
    change = _S.world.next(int(_S.timeout.total_seconds() * 1000))
    if backend == "nccl":
        torch.cuda.set_device(change["local_rank"] % max(torch.cuda.device_count(), 1))
    _build(change)
    _S.world.ready()
    # Started into a world a recovery formed (a replaced rank, an admitted standby): register()
    # receives the state from the new rank 0, as the survivors send it in their recovery.
    _S.joining = change["previous_generation"] != 0
    _start_watcher()


def register(*objects):
    """Keep these modules and optimizers in step across world changes (call once, before training)."""
    for o in objects:
        (_S.optimizers if isinstance(o, torch.optim.Optimizer) else _S.modules).append(o)
    if _S.joining:
        _S.joining = False
        _sync_state()


def on_change(fn):
    """Call fn(change) after each world change, once the state is in step again (a decorator too)."""
    _S.callbacks.append(fn)
    return fn


def iteration():
    """Steps completed (in step with the new rank 0 after a world change)."""
    return _S.iteration


def generation():
    """The generation this process's groups belong to (0 when not in place)."""
    return _S.change["generation"] if _S.change else 0


def _sync_state():
    """Broadcast parameters, buffers, optimizer state and the iteration from rank 0 of the new world."""
    for m in _S.modules:
        for t in list(m.parameters()) + list(m.buffers()):
            dist.broadcast(t.data, src=0)
    box = [{"iteration": _S.iteration, "optimizers": [o.state_dict() for o in _S.optimizers]}]
    dist.broadcast_object_list(box, src=0)
    _S.iteration = box[0]["iteration"]
    if dist.get_rank() != 0:
        for o, sd in zip(_S.optimizers, box[0]["optimizers"]):
            o.load_state_dict(sd)


def _drain():
    """Let go of the old world's groups and wait for CUDA's work to end."""
    _abort_groups()
    if dist.is_initialized():
        dist.destroy_process_group()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def recover(timeout=None):
    """Rebuild the world in place after a failed step: the next generation's group, state from its rank 0.

    Raises Excluded when this node was left out and Stale when the job restarted: the launcher
    then stops this process."""
    with _S.lock:
        _S.recovering = True
    _stop_watcher()
    _clear_interrupt()
    # Called from an except block (step's, or a custom loop's): the failed step's frames hold its work
    # objects, and a gloo work holds the group's connections.  While they live, destroying the group
    # closes nothing, and a peer blocked in the same collective (no neighbour of the dead rank) waits
    # out gloo's op timeout.
    failed = sys.exc_info()[2]
    if failed is not None:
        traceback.clear_frames(failed)
    _deadline(_drain, _S.abort_timeout, "the old world's teardown")
    ms = int((timeout if timeout is not None else _S.timeout.total_seconds()) * 1000)
    try:
        change = _S.world.next(ms)
    except Timeout as e:
        raise _NoChange(str(e)) from e
    _build(change)
    _S.world.ready()
    _sync_state()
    _start_watcher()
    for fn in _S.callbacks:
        fn(change)
    return change


def _recoverable(exc):
    """Whether a step's exception is the world's doing (a changed world, or a collective it broke)."""
    # Stale: musterd ended a store wait of this worker because its generation broke.
    return isinstance(exc, (WorldChanged, RuntimeError, Stale)) and _S.world is not None


@contextlib.contextmanager
def step():
    """One training step: counted when it completes; when the world changes under it, it is discarded
    and the world rebuilt in place (recover), and the caller's loop goes on."""
    try:
        yield
    except BaseException as e:  # noqa: B902 (WorldChanged is raised asynchronously)
        if not _recoverable(e):
            raise
        end = time.monotonic() + _S.change_timeout
        while True:
            try:
                recover(timeout=max(end - time.monotonic(), 0.001))
                return
            except _NoChange:
                raise e from None   # the world stood still: the step failed on its own
            except (WorldChanged, RuntimeError, Timeout, Stale):
                # The world changed again while it was being rebuilt (a second loss, a member that was
                # already dead), or an interrupt fired inside this handler: take the next one.
                if time.monotonic() >= end:
                    raise
    else:
        _S.iteration += 1


def shutdown():
    """Stop following the world and destroy the group (at the end of training)."""
    _stop_watcher()
    if _S.world is not None:
        _S.world.close()
        _S.world = None
    if dist.is_initialized():
        dist.destroy_process_group()
