"""gpu_init_vs_torch (torch side, and the summary of both sides).

As a worker under torchrun it times what gpu_init_vs_torch.c times under
`muster run`: CUDA context, then init_process_group('nccl') with device_id
(eager communicator init), then a first all-reduce of one float, and
optionally the all-reduce bus bandwidth at one size (nccl-tests' busbw =
algbw * 2(n-1)/n).  It prints one JSON line per rank, wall-clock ns.

    torchrun --standalone --nproc-per-node N gpu_init_vs_torch.py [--bytes N]
    python3 gpu_init_vs_torch.py summarize RESULT.jsonl... > table.md

summarize groups the lines by (impl, world, run) and reports, per run, the
slowest rank's time from launch (BENCH_T0_NS) to ready and to the first
all-reduce, and the in-process phases; then medians per (impl, world).
Phases: launch -> process start -> CUDA context -> communicator ready ->
first all-reduce done; ctx_to_ready is the communicator's own cost.
"""
import json
import os
import statistics
import sys
import time

PROCESS_START_NS = time.time_ns()
WARMUP = 5


def worker(argv):
    """Time the phases of one torch rank and print its JSON line."""
    nbytes, iters = 0, 20
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--bytes":
            nbytes = int(args.pop(0))
        elif flag == "--iters":
            iters = int(args.pop(0))
        else:
            sys.exit("usage: gpu_init_vs_torch.py [--bytes N] [--iters K]")
    import torch
    import torch.distributed as dist
    imported = time.time_ns()
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.zeros(1, device=device)
    torch.cuda.synchronize()
    ctx = time.time_ns()
    dist.init_process_group("nccl", device_id=device)
    ready = time.time_ns()
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    first = time.time_ns()
    if t.item() != world * (world + 1) / 2:
        print(f"rank {rank}: wrong sum {t.item()}", file=sys.stderr)
    busbw = busbw_gbps(dist, torch, device, nbytes, iters, world) if nbytes else -1.0
    # One write per record, newline included, so ranks sharing a pipe do not interleave.
    os.write(1, (json.dumps({
        "impl": "torch", "rank": rank, "world": world,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "torch": torch.__version__,
        "t0_ns": int(os.environ["BENCH_T0_NS"]) if os.environ.get("BENCH_T0_NS") else None,
        "start_ns": PROCESS_START_NS, "import_ns": imported, "ctx_ns": ctx,
        "ready_ns": ready, "first_ns": first,
        "busbw_bytes": nbytes, "busbw_gbps": round(busbw, 3)}) + "\n").encode())
    dist.destroy_process_group()


def busbw_gbps(dist, torch, device, nbytes, iters, world):
    """All-reduce bus bandwidth in GB/s at nbytes, after a warm-up."""
    buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
    for _ in range(WARMUP):
        dist.all_reduce(buf)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
        torch.cuda.synchronize()
    secs = (time.perf_counter() - t0) / iters
    return buf.numel() * 4 / secs / 1e9 * 2 * (world - 1) / world


def load(paths):
    """Group the JSON records of the given files by run: (impl, world, file, launch time)."""
    runs = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                # Ranks share one pipe: records of several ranks may share a line.
                dec, pos, line = json.JSONDecoder(), 0, line.strip()
                while line.startswith("{", pos) and '"impl"' in line:
                    rec, pos = dec.raw_decode(line, pos)
                    runs.setdefault((rec["impl"], rec["world"], path, rec.get("t0_ns") or 0), []).append(rec)
    return runs


def run_figures(recs):
    """The slowest rank's figures for one run, in milliseconds."""
    def ms(a, b):
        return max(r[b] - r[a] for r in recs) / 1e6

    t0 = recs[0]["t0_ns"]
    fig = {
        "ranks": len(recs),
        "ctx_to_ready_ms": ms("ctx_ns", "ready_ns"),
        "ready_to_first_ms": ms("ready_ns", "first_ns"),
        "busbw_gbps": min(r["busbw_gbps"] for r in recs),
        "nccl": recs[0]["nccl"],
    }
    if t0:
        fig["launch_to_ready_ms"] = (max(r["ready_ns"] for r in recs) - t0) / 1e6
        fig["launch_to_first_ms"] = (max(r["first_ns"] for r in recs) - t0) / 1e6
    return fig


def summarize(paths):
    """Print a Markdown table of medians and the JSON of every run."""
    per = {}
    for (impl, world, _, _), recs in sorted(load(paths).items()):
        if len(recs) == world:
            per.setdefault((impl, world), []).append(run_figures(recs))
    cols = ["launch_to_ready_ms", "launch_to_first_ms", "ctx_to_ready_ms", "ready_to_first_ms", "busbw_gbps"]
    print("| impl | ranks | runs | NCCL | " + " | ".join(c + " (median)" for c in cols) + " |")
    print("|" + "---|" * (4 + len(cols)))
    for (impl, world), figs in sorted(per.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        cells = []
        for c in cols:
            vals = [f[c] for f in figs if c in f and f[c] is not None and f[c] >= 0]
            cells.append(f"{statistics.median(vals):.1f}" if vals else "-")
        print(f"| {impl} | {world} | {len(figs)} | {figs[0]['nccl']} | " + " | ".join(cells) + " |")
    print()
    print("Every run (slowest rank):")
    print()
    print("```")
    for (impl, world), figs in sorted(per.items()):
        for f in figs:
            print(json.dumps({"impl": impl, "world": world, **{k: round(v, 1) if isinstance(v, float) else v
                                                              for k, v in f.items()}}))
    print("```")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "summarize":
        summarize(sys.argv[2:])
    else:
        worker(sys.argv[1:])
