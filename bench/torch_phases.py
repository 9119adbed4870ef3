"""Where a torch.distributed job's start-up time goes, under torchrun or `muster run`.

As a worker (run by a launcher, LAUNCH_T0_NS = the launch time in epoch ns):
the lesson's all-reduce with a timestamp around each phase, printed as one
JSON line per rank ("PHASES {...}").  NCCL on a GPU (ranks sharing one GPU
get their own NCCL_HOSTID), gloo without one.

As a summary (``--summarize T0_NS T1_NS < launcher-output``): one Markdown row
fragment "launcher | import | cuda | init_pg | first_ar | exit | total" in ms, taking
the slowest rank of each phase, since the job waits for that one.
"""
import json
import os
import re
import sys
import time

T_START = time.time_ns()


def worker():
    """Run the all-reduce and print this rank's phase timestamps."""
    import torch
    import torch.distributed as dist
    t_import = time.time_ns()
    gpu = torch.cuda.is_available()
    if gpu and int(os.environ["LOCAL_WORLD_SIZE"]) > torch.cuda.device_count():
        os.environ.setdefault("NCCL_HOSTID", f"muster-{os.environ['RANK']}")
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    if gpu:
        torch.cuda.init()  # apart from init_process_group: the driver's start-up is no store's doing
    t_cuda = time.time_ns()
    dist.init_process_group(backend="nccl" if gpu else "gloo")
    t_init = time.time_ns()
    rank = dist.get_rank()
    tensor = torch.tensor([rank + 1], dtype=torch.float32)
    if gpu:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    if gpu:
        torch.cuda.synchronize()
    t_ar = time.time_ns()
    dist.destroy_process_group()
    t_end = time.time_ns()
    print("PHASES " + json.dumps({"rank": rank, "sum": tensor.item(), "start": T_START,
                                  "import": t_import, "cuda": t_cuda, "init": t_init, "ar": t_ar, "end": t_end}),
          flush=True)


def summarize(t0, t1):
    """Print the row fragment for one run from the workers' PHASES lines."""
    # Ranks share the launcher's stdout, so one line may hold two ranks' output.
    ranks = [json.loads(m) for m in re.findall(r"PHASES (\{[^{}]*\})", sys.stdin.read())]
    if not ranks:
        print("no PHASES lines | - | - | - | - | - | %d" % ((t1 - t0) // 1000000))
        return
    ms = lambda ns: "%d" % (ns // 1000000)  # noqa: E731
    launcher = max(r["start"] for r in ranks) - t0
    imp = max(r["import"] - r["start"] for r in ranks)
    cuda = max(r["cuda"] - r["import"] for r in ranks)
    init = max(r["init"] - r["cuda"] for r in ranks)
    first = max(r["ar"] - r["init"] for r in ranks)
    exit_ = t1 - max(r["end"] for r in ranks)
    print(" | ".join(ms(v) for v in (launcher, imp, cuda, init, first, exit_, t1 - t0)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--summarize":
        summarize(int(sys.argv[2]), int(sys.argv[3]))
    else:
        worker()
