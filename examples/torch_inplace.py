"""The lesson's all-reduce grown into a training loop that survives a lost rank in place.

    muster run --nnodes 3:4 --nproc-per-node 1 --recovery in-place --url tcp://HOST:29600/job \\
        python3 examples/torch_inplace.py

A tiny model trains for STEPS iterations (MUSTER_DEMO_ITERATIONS, default 40;
MUSTER_DEMO_INTERVAL_MS between them): NCCL on a GPU, gloo with CPU tensors
without one.  When a node dies, the survivors keep their processes: the step
it broke is discarded, muster.torch rebuilds the group over the new world and
re-broadcasts the model and optimizer from the new rank 0, and the loop goes
on.  A process started into the new world (a replaced rank, an admitted
standby) joins the same way.  Every iteration, every rank prints

    [Rank R] pid P generation G world W iteration I: sum S checksum C

where S is the all-reduced sum of rank + 1 over the current world and C a
checksum of the model's parameters, the same on every rank of a generation.
"""
import os
import time

import torch
import torch.distributed as dist

import muster.torch as mt

STEPS = int(os.environ.get("MUSTER_DEMO_ITERATIONS", "40"))
PAUSE = int(os.environ.get("MUSTER_DEMO_INTERVAL_MS", "100")) / 1000.0
USE_GPU = torch.cuda.is_available()


def checksum(model):
    """A checksum of the parameters: equal on every rank whose model is in step."""
    return sum(float(p.detach().double().sum()) for p in model.parameters())


def train_step(model, opt, device):
    """One step: the same batch everywhere, gradients averaged over the world, then the sum line."""
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.ones(8, 4, device=device) * (mt.iteration() % 5 + 1)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= world
    opt.step()
    s = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(s, op=dist.ReduceOp.SUM)
    print(f"[Rank {rank}] pid {os.getpid()} generation {mt.generation()} world {world} "
          f"iteration {mt.iteration() + 1}: sum {s.item():.1f} checksum {checksum(model):.6f}", flush=True)


def main():
    if USE_GPU and int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > torch.cuda.device_count():
        # Ranks sharing a GPU must each look like their own host to NCCL.
        os.environ.setdefault("NCCL_HOSTID", f"muster-{os.environ.get('MUSTER_NODE_ID', os.getpid())}")
    mt.init_process_group("nccl" if USE_GPU else "gloo")
    device = torch.device("cuda", torch.cuda.current_device()) if USE_GPU else torch.device("cpu")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mt.register(model, opt)   # a process new to a recovered world receives the state here
    while mt.iteration() < STEPS:
        with mt.step():
            train_step(model, opt, device)
        time.sleep(PAUSE)
    print(f"[Rank {dist.get_rank()}] pid {os.getpid()} finished {STEPS} iterations: world {dist.get_world_size()}",
          flush=True)
    mt.shutdown()


if __name__ == "__main__":
    main()
