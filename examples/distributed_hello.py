"""The seed lesson's distributed_hello.py, run by `muster run` instead of torchrun.

Unchanged but for the device: NCCL on a GPU, as in the lesson; without one,
gloo with CPU tensors, so the same command runs on any machine:

    muster run --standalone --nproc-per-node 4 python3 examples/distributed_hello.py

Every rank prints `After all_reduce: [10.0]` (1 + 2 + 3 + 4).
"""
import os
import torch
import torch.distributed as dist

USE_GPU = torch.cuda.is_available()


def run():
    """
    Initializes the process group and performs a simple All-Reduce operation.
    """
    # 1. Get rank and world size from environment variables
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    local_rank = int(os.environ['LOCAL_RANK'])

    # 2. Pin the process to a specific GPU (with fewer GPUs than workers, ranks share them)
    if USE_GPU:
        torch.cuda.set_device(local_rank % torch.cuda.device_count())

    # 3. Create a tensor on this process's device.
    tensor = torch.tensor([rank + 1], dtype=torch.float32)
    if USE_GPU:
        tensor = tensor.cuda()

    print(f"[Rank {rank}] Before all_reduce: {tensor.tolist()}")

    # 4. Perform the All-Reduce operation.
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)

    # For 4 workers: ranks 0-3 had [1.], [2.], [3.], [4.]. Sum is [10.].
    print(f"[Rank {rank}] After all_reduce: {tensor.tolist()}")


def main():
    """
    Main entry point. `muster run` (or `torchrun`) launches this script on multiple processes.
    """
    if USE_GPU and int(os.environ['LOCAL_WORLD_SIZE']) > torch.cuda.device_count():
        # NCCL refuses two ranks of one communicator on one GPU unless each looks like its own host.
        os.environ.setdefault('NCCL_HOSTID', f"muster-{os.environ['RANK']}")
        os.environ.setdefault('NCCL_SOCKET_IFNAME', 'lo')
    dist.init_process_group(backend='nccl' if USE_GPU else 'gloo')
    run()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
