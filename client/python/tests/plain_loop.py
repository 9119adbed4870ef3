"""A plain torch.distributed loop that knows nothing of muster: gloo over the
env:// store `muster run` points it at, MUSTER_DEMO_ITERATIONS all-reduces.
Prints `[Rank R] pid P world W iteration I: sum S` and, at the end,
`[Rank R] pid P finished N iterations: world W`."""

import datetime
import os
import time

import torch
import torch.distributed as dist

steps = int(os.environ.get("MUSTER_DEMO_ITERATIONS", "20"))
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
for it in range(steps):
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    os.write(1, f"[Rank {rank}] pid {os.getpid()} world {world} iteration {it + 1}: sum {t.item():.1f}\n".encode())
    time.sleep(0.1)
os.write(1, f"[Rank {rank}] pid {os.getpid()} finished {steps} iterations: world {world}\n".encode())
dist.destroy_process_group()
