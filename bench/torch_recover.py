"""Kill a node of a torch job; time until every survivor's next all-reduce, four ways side by side.

    python3 bench/torch_recover.py --muster build/client/cli/muster --musterd build/store-server/musterd \\
        [--python /usr/bin/python3] [--modes a,b,c,d] [--runs 3] [--ranks 4] [--out DIR]

The modes, each run in turn within one run so they share the machine's state:
  a  muster.torch in place: examples/torch_inplace.py under `muster run --recovery in-place`, torch's
     default environment (muster.torch sets its guard variables itself);
  b  the hand-tuned torch re-init (bench/torch_reinit.py): guard variables, polled collectives,
     abort, destroy and init_process_group over a new PrefixStore, torch's TCPStore in its own process;
  c  `muster run --recovery restart` of the same example;
  d  torchrun's restart of the same example (c10d rendezvous, torch's defaults).
RANKS nodes of one rank each (NCCL on the GPU when there is one, each node its own NCCL_HOSTID;
gloo on CPU otherwise).  Once every node passed iteration 5, node 1 is killed whole (SIGKILL to its
process group: launcher and worker, as a machine that goes away).  The figure is the time from the
kill to the first line of the smaller world on the slowest survivor; the checks are that every
survivor got there, whether it is still the process it started in, and that the ranks of each
iteration of the smaller world print one checksum.  One JSON object per mode and run goes to
DIR/torch-recover.jsonl, a table to DIR/torch-recover.md and to stdout.  Every wait is bounded.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "torch_inplace.py")
REINIT = os.path.join(ROOT, "bench", "torch_reinit.py")
LINE = re.compile(r"\[Rank (\d+)\] pid (\d+) generation (\d+) world (\d+) iteration (\d+): sum \S+ checksum (\S+)")
NAMES = {"a": "muster.torch in place", "b": "hand-tuned torch re-init", "c": "muster run --recovery restart",
         "d": "torchrun restart"}
START_S = 240        # every node passed iteration 5 (torchrun's first rendezvous included)
AFTER_S = {"a": 90, "b": 120, "c": 120, "d": 300}


class Node:
    """One node: a process group whose stdout lines are stamped as they arrive."""

    def __init__(self, argv, env, err):
        self.lines = []
        with open(err, "w") as e:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=e, env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            m = LINE.search(raw.decode(errors="replace"))
            if m:
                self.lines.append((time.monotonic(), m.groups()))

    def reached(self, it):
        return any(int(g[4]) >= it for _, g in self.lines)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


def free_port():
    """A port nobody listens on now (torchrun's rendezvous endpoint)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, proc, seconds=30):
    """The contents of a port file once written."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path):
            return open(path).read().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"no port in {path}")


def start_store(mode, a, tmp, run):
    """The job's store: musterd (a, c), torch's TCPStore (b), none of ours (d: torchrun hosts it)."""
    pf = os.path.join(tmp, f"port-{mode}{run}")
    if mode in "ac":
        p = subprocess.Popen([a.musterd, "--listen", "127.0.0.1:0", "--port-file", pf, "--log-level", "warn"],
                             stderr=open(os.path.join(tmp, f"store-{mode}{run}.log"), "w"), start_new_session=True)
    elif mode == "b":
        p = subprocess.Popen([a.python, REINIT, "store", pf], stderr=open(os.path.join(tmp, f"store-b{run}.log"), "w"),
                             start_new_session=True)
    else:
        return None, str(free_port())
    return p, wait_file(pf, p)


def node_argv(mode, a, i, port, run):
    """The command line of node i."""
    if mode in "ac":
        return [a.muster, "--url", f"tcp://127.0.0.1:{port}/tr{mode}{run}", "run", "--nnodes",
                f"{a.ranks - 1}:{a.ranks}", "--nproc-per-node", "1", "--recovery",
                "in-place" if mode == "a" else "restart", "--max-restarts", "3", "--node-id", f"n{i}",
                "--last-call", str(a.last_call_ms), a.python, EXAMPLE]
    if mode == "b":
        return [a.python, REINIT, "rank"]
    # torch.distributed.run's own main through muster.torchrun, which only mends torch 1.13's
    # --redirects/--tee parsing under Python 3.11; the rendezvous is torch's c10d.  Underscored
    # flags: torch 1.13 knows no others.
    return [a.python, "-m", "muster.torchrun", "--nnodes", f"{a.ranks - 1}:{a.ranks}", "--nproc_per_node", "1",
            "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"tr{run}",
            "--max_restarts", "3", EXAMPLE]


def one(mode, a, tmp, run):
    """Start the job, kill node 1, time and check the survivors; one result object."""
    store, port = start_store(mode, a, tmp, run)
    nodes, res = [], {"mode": mode, "run": run, "ranks": a.ranks, "ok": False}
    try:
        for i in range(a.ranks):
            env = dict(os.environ, GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
                       NCCL_HOSTID=f"host-n{i}", MUSTER_DEMO_ITERATIONS=str(a.iterations),
                       MUSTER_DEMO_INTERVAL_MS=str(a.interval_ms), RANK=str(i), WORLD_SIZE=str(a.ranks),
                       MASTER_PORT=port)
            nodes.append(Node(node_argv(mode, a, i, port, run), env, os.path.join(tmp, f"{mode}{run}-n{i}.err")))
            if mode == "d" and i == 0:
                time.sleep(1.0)   # torchrun: the first agent hosts the rendezvous store
        end = time.monotonic() + START_S
        while not all(n.reached(5) for n in nodes):
            if time.monotonic() > end or any(n.proc.poll() is not None for n in nodes):
                res["error"] = "the job did not reach iteration 5"
                return res
            time.sleep(0.01)
        kill = time.monotonic()
        nodes[1].kill()
        survivors = [n for i, n in enumerate(nodes) if i != 1]
        end = kill + AFTER_S[mode]
        first = {}
        while len(first) < len(survivors) and time.monotonic() < end:
            for k, n in enumerate(survivors):
                if k not in first:
                    got = [t for t, g in n.lines if int(g[3]) == a.ranks - 1 and t > kill]
                    if got:
                        first[k] = got[0]
            time.sleep(0.005)
        if len(first) < len(survivors):
            res["error"] = f"{len(survivors) - len(first)} survivor(s) saw no world {a.ranks - 1} within " \
                           f"{AFTER_S[mode]} s"
            return res
        time.sleep(0.3)   # a few more lines for the checks
        res["survivor_ms"] = [round((first[k] - kill) * 1000, 1) for k in sorted(first)]
        res["ms"] = max(res["survivor_ms"])
        res["in_place"] = all(len({g[1] for _, g in n.lines}) == 1 for n in survivors)
        sums = {}
        for n in survivors:
            for _, g in n.lines:
                if int(g[3]) == a.ranks - 1:
                    sums.setdefault((g[2], g[4]), set()).add(g[5])
        res["checksums_agree"] = all(len(v) == 1 for v in sums.values())
        res["ok"] = res["checksums_agree"]
        return res
    finally:
        for n in nodes:
            n.kill()
        if store is not None:
            store.send_signal(signal.SIGKILL)
            store.wait(10)


def table(results, a):
    """The markdown table: one row per run, the ratios, medians."""
    modes = a.modes.split(",")
    out = [f"| run | " + " | ".join(f"({m}) {NAMES[m]}" for m in modes) + " |" +
           (" (a)/(b) |" if "a" in modes and "b" in modes else ""),
           "|---" * (len(modes) + 1 + ("a" in modes and "b" in modes)) + "|"]
    by = {(r["mode"], r["run"]): r for r in results}

    def cell(r):
        if r is None:
            return "-"
        if "ms" not in r:
            return "FAILED: " + r.get("error", "checks")
        place = "in place" if r["in_place"] else "new processes"
        return f"{r['ms'] / 1000:.2f} s ({place}{'' if r['ok'] else ', CHECKSUMS DIFFER'})"
    for run in range(1, a.runs + 1):
        row = f"| {run} | " + " | ".join(cell(by.get((m, run))) for m in modes) + " |"
        ra, rb = by.get(("a", run)), by.get(("b", run))
        if "a" in modes and "b" in modes:
            row += f" {ra['ms'] / rb['ms']:.2f} |" if ra and rb and "ms" in ra and "ms" in rb else " - |"
        out.append(row)
    med = [statistics.median([r["ms"] for r in results if r["mode"] == m and "ms" in r] or [float("nan")])
           for m in modes]
    out.append("| median | " + " | ".join(f"{x / 1000:.2f} s" for x in med) + " |" +
               (" |" if "a" in modes and "b" in modes else ""))
    return "\n".join(out)


def summary(results, a):
    """One line for a test log: each mode's median, and (a)/(b)."""
    med = {}
    for m in a.modes.split(","):
        got = [r["ms"] for r in results if r["mode"] == m and "ms" in r]
        med[m] = statistics.median(got) if got else None
    parts = [f"({m}) {v / 1000:.2f} s" if v else f"({m}) failed" for m, v in med.items()]
    if med.get("a") and med.get("b"):
        parts.append(f"(a)/(b) {med['a'] / med['b']:.2f}")
    backend = "nccl" if subprocess.run([a.python, "-c", "import torch,sys; sys.exit(not torch.cuda.is_available())"],
                                       capture_output=True).returncode == 0 else "gloo"
    return f"bench: torch recovery, kill to next all-reduce ({backend}, {a.ranks} ranks, {a.runs} run(s)): " + \
        ", ".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--muster", required=True)
    p.add_argument("--musterd", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--modes", default="a,b,c,d")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--interval-ms", type=int, default=20)
    p.add_argument("--last-call-ms", type=int, default=2000)
    p.add_argument("--out", default=None)
    p.add_argument("--d-timeout", type=int, default=AFTER_S["d"], help="seconds (d) may take after the kill")
    a = p.parse_args()
    AFTER_S["d"] = a.d_timeout
    if os.environ.get("MUSTER_TEST_SANITIZE", "none") not in ("none", ""):
        print("a sanitizer build: muster's extension cannot load into this python; skipped")
        return 77
    if subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"no torch under {a.python}: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="muster-tr-")
    out = a.out or tmp
    os.makedirs(out, exist_ok=True)
    results = []
    with open(os.path.join(out, "torch-recover.jsonl"), "a") as j:
        for run in range(1, a.runs + 1):
            for m in a.modes.split(","):
                r = one(m, a, tmp, run)
                results.append(r)
                j.write(json.dumps(r) + "\n")
                j.flush()
                print(f"run {run} ({m}) {NAMES[m]}: " +
                      (f"{r['ms']:.0f} ms, survivors {r['survivor_ms']}, in place {r['in_place']}, "
                       f"checksums agree {r['checksums_agree']}" if "ms" in r else "FAILED: " + r["error"]),
                      flush=True)
    t = table(results, a)
    with open(os.path.join(out, "torch-recover.md"), "w") as f:
        f.write(t + "\n")
    print(t)
    print(f"logs: {tmp}")
    print(summary(results, a))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
