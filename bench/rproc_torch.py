#!/usr/bin/python3
"""Real-process rendezvous through torch's own TCPStore client, for comparison with
muster-rproc.  Forks N processes from one parent that has already imported torch (a fresh
interpreter per rank would cost ~1 s of CPU and ~200 MiB each), releases them at once
through a gate, and each does what a store-based barrier and an id broadcast need:
add(joined) -> the N-th sets go -> wait(go) -> rank 0 sets the 128-byte id -> the others
get(id) (torch's get is WAIT + GET).  Prints one JSON object like muster-rproc's.

Usage: /usr/bin/python3 rproc_torch.py --port PORT --procs N [--timeout S] [--prefix P]
"""
import argparse
import datetime
import json
import mmap
import os
import signal
import struct
import sys
import time

SLOT = struct.Struct("<QQii")  # t_conn, t_done, err, step (as muster-rproc)


def child(rank, args, gate, shm):
    """One rank: connect, barrier through add/wait, hold the id; exit status says ok."""
    import torch.distributed as dist
    os.read(gate, 1)
    step = 1
    try:
        store = dist.TCPStore("127.0.0.1", args.port, args.procs, False,
                              datetime.timedelta(seconds=args.timeout), wait_for_workers=False)
        t_conn = time.monotonic_ns()
        step = 3
        p = args.prefix
        if store.add(p + "joined", 1) == args.procs:
            store.set(p + "go", "1")
        store.wait([p + "go"])
        ident = b"I" * 128
        step = 4
        if rank == 0:
            store.set(p + "id", ident)
        elif store.get(p + "id") != ident:
            step = 5
            raise ValueError("wrong id")
        SLOT.pack_into(shm, rank * SLOT.size, t_conn, time.monotonic_ns(), 0, 0)
        os._exit(0)
    except Exception as e:  # a failed rank records its step and leaves
        SLOT.pack_into(shm, rank * SLOT.size, 0, 0, 1, step)
        sys.stderr.write("rank %d: %s\n" % (rank, e))
        os._exit(1)


def main():
    """Fork the ranks, open the gate, reap them under a deadline, report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--procs", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--prefix", default="rp%d/" % os.getpid())
    args = ap.parse_args()
    import torch.distributed  # noqa: F401  (imported once, before the fork)
    shm = mmap.mmap(-1, SLOT.size * args.procs)
    rfd, wfd = os.pipe()
    pids = []
    for rank in range(args.procs):
        pid = os.fork()
        if pid == 0:
            os.close(wfd)
            child(rank, args, rfd, shm)
        pids.append(pid)
    os.close(rfd)
    t0 = time.monotonic_ns()
    os.close(wfd)
    deadline = time.monotonic() + args.timeout + 5
    left = set(pids)
    while left and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            left.discard(pid)
        else:
            time.sleep(0.001)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    slots = [SLOT.unpack_from(shm, i * SLOT.size) for i in range(args.procs)]
    done = sorted(s[1] - t0 for s in slots if s[1])
    ok = len(done)
    out = {
        "tool": "rproc_torch", "op": "add+wait+get", "procs": args.procs, "ok": ok,
        "errors": args.procs - ok, "complete": ok == args.procs,
        "total_s": done[-1] / 1e9 if ok == args.procs else -1,
        "connect_all_s": (max(s[0] for s in slots) - t0) / 1e9 if ok else -1,
        "rank_done_p50_s": done[len(done) // 2] / 1e9 if done else 0,
    }
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
