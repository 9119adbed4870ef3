"""A torchrun worker: gloo all-reduce over torch's env:// store, then the
same world through MusterStore() on $MUSTER_URL.  Prints one result line."""

import datetime
import os

import torch
import torch.distributed as dist

from muster.torch import MusterStore

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
store = MusterStore(timeout=datetime.timedelta(seconds=60))  # $MUSTER_URL, set by the rendezvous backend
gen = os.environ["MUSTER_GENERATION"]
store.client.barrier(f"workers/{gen}", world, timeout=60)  # every worker reached musterd too
# One write per line: the workers share torch's agent's stdout, and print() may split a line in two
# writes under PYTHONUNBUFFERED, which lets another rank's line land in the middle.
line = (f"rank={rank} world={world} sum={t.item()} agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')} "
        f"muster_url={os.environ['MUSTER_URL']}\n")
os.write(1, line.encode())
dist.destroy_process_group()
