"""One rank of a gloo all-reduce: python3 allreduce_worker.py RANK WORLD MODE URL.

MODE store: init_process_group(store=MusterStore(URL)); init_method: URL is
muster://, rank and world size as arguments; init_method_env: the same with
RANK and WORLD_SIZE in the environment.  Prints "sum=<all-reduced value>"."""

import datetime
import os
import sys

import torch
import torch.distributed as dist

from muster.torch import MusterStore

rank, world, mode, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
timeout = datetime.timedelta(seconds=60)
if mode == "store":
    dist.init_process_group("gloo", store=MusterStore(url, timeout=timeout), rank=rank, world_size=world,
                            timeout=timeout)
elif mode == "init_method":
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world, timeout=timeout)
else:
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    dist.init_process_group("gloo", init_method=url, timeout=timeout)
assert dist.get_rank() == rank and dist.get_world_size() == world
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
dist.barrier()
print(f"rank={rank} sum={t.item()}", flush=True)
dist.destroy_process_group()
