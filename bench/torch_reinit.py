"""The hand-tuned torch recovery that muster.torch is measured against (bench/torch_recover.py, mode b).

    python3 bench/torch_reinit.py store PORT_FILE     # torch's TCPStore, in a process of its own
    RANK=r WORLD_SIZE=n MASTER_PORT=p python3 bench/torch_reinit.py rank

What a careful torch user can do today without muster, as measured in the reference notes: the five
TORCH_NCCL variables that keep the watchdog from killing the process and from sleeping on the
group's lock; every collective polled until it completes or fails; on a failure
`_abort_process_group()`, `destroy_process_group()`, then a new `init_process_group` over a
PrefixStore never used before, the survivors agreeing on their new ranks through the store (in old
rank order), and the model re-broadcast from the new rank 0.  It assumes one rank is lost at a time,
which is what the benchmark does; the store lives in its own process so that any rank may die.

The training step and the printed line are examples/torch_inplace.py's, so the two are timed alike.
"""
import datetime
import os
import sys
import time

# Spelled here rather than imported from muster.torch: this peer must run without muster.
GUARD_ENV = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "100",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
    "TORCH_NCCL_ENABLE_MONITORING": "0",
    "TORCH_NCCL_RETHROW_CUDA_ERRORS": "0",
}
for _k, _v in GUARD_ENV.items():
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402 (after the environment torch reads at import)
import torch.distributed as dist  # noqa: E402

STEPS = int(os.environ.get("MUSTER_DEMO_ITERATIONS", "40"))
PAUSE = int(os.environ.get("MUSTER_DEMO_INTERVAL_MS", "100")) / 1000.0
OP_TIMEOUT = float(os.environ.get("REINIT_OP_TIMEOUT", "60"))
USE_GPU = torch.cuda.is_available()


def serve(port_file):
    """Host the job's TCPStore until killed."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=300))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(store.port))
    os.rename(port_file + ".tmp", port_file)
    while True:
        time.sleep(3600)


def collective(work):
    """Wait for an async collective by polling, so that an NCCL error surfaces instead of a hang."""
    end = time.monotonic() + OP_TIMEOUT
    while not work.is_completed():
        if time.monotonic() > end:
            raise RuntimeError(f"collective did not complete within {OP_TIMEOUT:.0f} s")
        time.sleep(0.0005)
    work.wait()


def all_reduce(t):
    """An all-reduce (sum) that fails rather than hangs when a peer is gone."""
    collective(dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True))


def checksum(model):
    """A checksum of the parameters (as the example computes it)."""
    return sum(float(p.detach().double().sum()) for p in model.parameters())


class Job:
    """One rank's view: its place in the current world and the generation's store prefix."""

    def __init__(self, store, rank, world):
        self.store, self.rank, self.world, self.generation = store, rank, world, 1
        self.backend = "nccl" if USE_GPU else "gloo"

    def init(self):
        """Initialise the default group of this generation over its own prefix."""
        prefix = dist.PrefixStore(f"reinit/{self.generation}/pg/", self.store)
        kw = {}
        if USE_GPU and "device_id" in dist.init_process_group.__code__.co_varnames:
            kw["device_id"] = torch.device("cuda", 0)
        dist.init_process_group(self.backend, store=prefix, rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(seconds=OP_TIMEOUT), **kw)

    def rebuild(self):
        """Tear the failed group down and agree on the next world: the survivors in old rank order."""
        abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
        if abort is not None and self.backend == "nccl":
            abort()
        if dist.is_initialized():
            dist.destroy_process_group()
        if USE_GPU:
            torch.cuda.synchronize()
        self.generation += 1
        g = f"reinit/{self.generation}/"
        self.store.add(f"{g}r{self.rank}", 1)
        survivors = self.world - 1
        end = time.monotonic() + OP_TIMEOUT
        arrived = self.store.add(f"{g}arrived", 1)
        while arrived < survivors:
            if time.monotonic() > end:
                raise RuntimeError("the survivors did not gather")
            time.sleep(0.001)
            arrived = self.store.add(f"{g}arrived", 0)
        alive = [r for r in range(self.world) if self.store.add(f"{g}r{r}", 0) > 0]
        self.rank, self.world = alive.index(self.rank), len(alive)
        self.init()


def step(job, model, opt, device, it):
    """examples/torch_inplace.py's step: averaged gradients, then the sum line."""
    x = torch.ones(8, 4, device=device) * (it % 5 + 1)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        all_reduce(p.grad)
        p.grad /= job.world
    opt.step()
    s = torch.tensor([job.rank + 1.0], device=device)
    all_reduce(s)
    print(f"[Rank {job.rank}] pid {os.getpid()} generation {job.generation} world {job.world} "
          f"iteration {it + 1}: sum {s.item():.1f} checksum {checksum(model):.6f}", flush=True)


def rank_main():
    """Train, and rebuild the world in this process whenever a collective fails."""
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=datetime.timedelta(seconds=OP_TIMEOUT))
    job = Job(store, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    if USE_GPU:
        torch.cuda.set_device(0)
    device = torch.device("cuda", 0) if USE_GPU else torch.device("cpu")
    job.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    it = 0
    while it < STEPS:
        try:
            step(job, model, opt, device, it)
            it += 1
            failed = False
        except RuntimeError as e:
            sys.stderr.write(f"rank {job.rank}: {e}; rebuilding\n")
            failed = True
        if failed:
            # Outside the except block: the traceback, and with it the failed work that holds the
            # group's connections, is gone, so destroying the group closes them and a peer blocked
            # in the same collective fails at once instead of at its timeout.
            job.rebuild()
            for p in model.parameters():
                collective(dist.broadcast(p.data, src=0, async_op=True))
            box = [it]
            dist.broadcast_object_list(box, src=0)
            it = box[0]
        time.sleep(PAUSE)
    print(f"[Rank {job.rank}] pid {os.getpid()} finished {STEPS} iterations: world {job.world}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1:2] == ["store"]:
        serve(sys.argv[2])
    else:
        rank_main()
