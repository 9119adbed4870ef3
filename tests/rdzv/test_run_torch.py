"""`muster run` as a torchrun drop-in: unmodified torch.distributed programs under the launcher.

Usage: test_run_torch.py MUSTERD MUSTER_CLI

Each check starts the launcher (and, where it needs one, its own musterd on
127.0.0.1 port 0) with a small torch script written to a temporary
directory: the seed lesson's script changed only to gloo with CPU tensors,
collectives, a rank killed once, an error file, garbage sent to the relay,
torch's own store API, and musterd restarted with --data-dir mid-job.
Every child is bounded in time.  Prints one line per check and exits 1 if
any failed.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tcpstore"))
from test_torch import Checks  # noqa: E402  (one check counter for both torch suites)

HOST = "127.0.0.1"
STEP_S = 180  # bound on any one launcher

HELLO = '''
import os
import torch
import torch.distributed as dist

def run():
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    local_rank = int(os.environ['LOCAL_RANK'])
    tensor = torch.tensor([rank + 1], dtype=torch.float32)
    print(f"[Rank {rank}] Before all_reduce: {tensor.tolist()}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    print(f"[Rank {rank}] After all_reduce: {tensor.tolist()}")

def main():
    dist.init_process_group(backend='gloo')
    run()
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
'''

COLLECTIVES = '''
import datetime, torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
dist.barrier()
sub = dist.new_group([0, 1])
t = torch.tensor([float(rank + 1)])
if rank in (0, 1):
    dist.all_reduce(t, group=sub)
dist.monitored_barrier(timeout=datetime.timedelta(seconds=60))
print(f"COLL {rank} {t.item()}", flush=True)
dist.barrier()
dist.destroy_process_group()
'''

KILL_ONCE = '''
import os, signal, torch, torch.distributed as dist
restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
dist.init_process_group(backend="gloo")
rank = dist.get_rank()
print(f"RESTART {rank} {restart}", flush=True)
if restart == "0" and rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"SUM {rank} {t.item()}", flush=True)
dist.destroy_process_group()
'''

RECORD = '''
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group(backend="gloo")
    if dist.get_rank() == 1:
        raise RuntimeError("boom from rank 1")
    dist.barrier()

main()
'''

BAD_INPUT = '''
import os, socket, struct, torch, torch.distributed as dist
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])

def closed_after(data):
    s = socket.create_connection((addr, port), timeout=30)
    try:
        s.sendall(data)
        return s.recv(16) == b""
    except (ConnectionResetError, BrokenPipeError):  # closed while we still sent
        return True
    finally:
        s.close()

if os.environ["LOCAL_RANK"] == "0":
    print("GARBAGE", closed_after(b"\\xff" * 64), flush=True)
    print("HUGE_KEY", closed_after(b"\\x00" + struct.pack("<Q", 1 << 40)), flush=True)
    big = 2 << 20
    print("BIG_REQUEST", closed_after(b"\\x00" + struct.pack("<Q", 1) + b"k" + struct.pack("<Q", big) + b"v" * big),
          flush=True)
dist.init_process_group(backend="gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"SUM {dist.get_rank()} {t.item()}", flush=True)
dist.destroy_process_group()
'''

STORE_API = '''
import datetime, os, torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                  timeout=datetime.timedelta(seconds=10))
bad = []
def eq(got, want, what):
    if got != want:
        bad.append(f"{what}: got {got!r}, want {want!r}")
s.set("foo", "bar")
eq(s.get("foo"), b"bar", "get after set")
eq(s.add("cnt", 5), 5, "add")
eq(s.add("cnt", 2), 7, "add again")
eq(s.get("cnt"), b"7", "add is decimal text")
eq(s.compare_set("cs", "", "v1"), b"v1", "compare_set creates on empty expected")
eq(s.compare_set("cs", "v1", "v2"), b"v2", "compare_set swaps on match")
eq(s.compare_set("cs", "zz", "v3"), b"v2", "compare_set answers current on mismatch")
eq(s.compare_set("cs-missing", "x", "y"), b"x", "compare_set answers expected on a missing key")
eq(s.num_keys(), 3, "num_keys counts this generation's keys")
try:
    s.wait(["late"], datetime.timedelta(milliseconds=300))
    bad.append("wait on a missing key did not time out")
except RuntimeError:
    pass
# An old client has no CANCEL_WAIT: its next request says it gave up the wait (as for the listener).
s.set("after", "1")
other = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                      timeout=datetime.timedelta(seconds=10))
other.set("late", "now")
eq(s.add("cnt", 1), 8, "add after a timed-out wait and a late set")
eq(s.get("late"), b"now", "get after a timed-out wait")
s.wait(["foo", "late"])
eq(s.delete_key("foo"), True, "delete_key of a present key")
eq(s.delete_key("foo"), False, "delete_key of an absent key")
s.append("ap", "x") if hasattr(s, "append") else None
print("STORE_API", "OK" if not bad else bad, flush=True)
'''

SLOW = '''
import os, time, torch, torch.distributed as dist
restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
dist.init_process_group(backend="gloo")
rank = dist.get_rank()
open(os.path.join(os.environ["OUT"], f"up.{restart}.{rank}"), "w").close()
if restart == "0":
    time.sleep(60)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"SUM {rank} {restart} {t.item()}", flush=True)
dist.destroy_process_group()
'''


check = Checks()


class Daemon:
    """A musterd on 127.0.0.1 (port 0 unless one is given), with its port file."""

    def __init__(self, tmp, extra=(), port=0):
        self.tmp, self.extra = tmp, extra
        self.start(port)

    def start(self, port):
        port_file = os.path.join(self.tmp, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(os.path.join(self.tmp, "musterd.log"), "a")
        self.proc = subprocess.Popen([MUSTERD, "--listen", f"{HOST}:{port}", "--port-file", port_file, *self.extra],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("musterd did not start")
            time.sleep(0.02)
        self.port = int(open(port_file).read())

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.log.close()

    def url(self, ns=""):
        return f"tcp://{HOST}:{self.port}" + (f"/{ns}" if ns else "")


def launch(tmp, script, *args, env=None):
    """Start `muster run ARGS python3 SCRIPT` (not waited for)."""
    path = os.path.join(tmp, "script.py")
    if not os.path.exists(path) or open(path).read() != script:
        with open(path, "w") as f:
            f.write(script)
    e = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":" + os.environ.get("PATH", ""), OUT=tmp)
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    return subprocess.Popen([MUSTER_CLI, "run", *args, sys.executable, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=e)


def finish(p):
    """Wait for a launcher; (exit status, stdout lines, stderr)."""
    try:
        out, err = p.communicate(timeout=STEP_S)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out.splitlines(), err


def run(tmp, script, *args, env=None):
    """Run a launcher to the end; (exit status, stdout lines, stderr)."""
    return finish(launch(tmp, script, *args, env=env))


def expect(rc, lines, err, want_rc, want_lines, what):
    """Check the exit status and that every wanted line was printed (once each)."""
    ok = check(rc == want_rc, f"{what}: exit status {rc}, want {want_rc}")
    missing = [w for w in want_lines if lines.count(w) != 1]
    ok = check(not missing, f"{what}: missing {missing}") and ok
    if not ok:
        print("  stdout:", lines, "\n  stderr:", err[-3000:], flush=True)
    return ok


def hello_lines(world, first=0):
    """What the lesson's script prints after its all_reduce, for ranks first.. of a world."""
    total = float(world * (world + 1) // 2)
    return [f"[Rank {r}] After all_reduce: [{total}]" for r in range(first, world)]


def t_hello(tmp):
    """The lesson's script (gloo, CPU tensors) on four workers: every rank prints 10.0, in whole lines."""
    # Unbuffered workers write a print's words and its newline apart; the launcher hands on whole lines.
    rc, lines, err = run(tmp, HELLO, "--standalone", "--nproc_per_node", "4", env={"PYTHONUNBUFFERED": "1"})
    expect(rc, lines, err, 0, hello_lines(4), "hello")


def t_two_nodes(tmp):
    """Two --nnodes 2 launchers of two workers against one musterd form one world of four."""
    d = Daemon(tmp)
    try:
        ps = [launch(tmp, HELLO, "--url", d.url("two"), "--nnodes", "2", "--nproc-per-node", "2",
                     "--node-id", f"n{i}") for i in range(2)]
        res = [finish(p) for p in ps]
        lines = res[0][1] + res[1][1]
        expect(max(r[0] for r in res), lines, res[0][2] + res[1][2], 0, hello_lines(4), "two nodes")
    finally:
        d.stop()


def t_two_jobs(tmp):
    """Two jobs at once on one musterd (torchrun's spellings): each forms its own world, in its own namespace."""
    d = Daemon(tmp)
    try:
        ps = [launch(tmp, HELLO, "--rdzv_endpoint", f"{HOST}:{d.port}", "--rdzv_id", job, "--nnodes", "1",
                     "--nproc_per_node", str(n)) for job, n in (("jobA", 2), ("jobB", 3))]
        (ra, la, ea), (rb, lb, eb) = [finish(p) for p in ps]
        expect(ra, la, ea, 0, hello_lines(2), "job A")
        expect(rb, lb, eb, 0, hello_lines(3), "job B")
        for job in ("jobA", "jobB"):
            r = subprocess.run([MUSTER_CLI, "--url", d.url(job), "keys", "torch/"], stdout=subprocess.PIPE,
                               text=True, timeout=30)
            check(r.returncode == 0 and "/worker/attempt_0/" in r.stdout, f"{job}'s torch keys are in its namespace")
    finally:
        d.stop()


def t_restart(tmp):
    """A rank SIGKILLed once: every node restarts in the next generation, with one restart count, and finishes."""
    rc, lines, err = run(tmp, KILL_ONCE, "--standalone", "--nproc-per-node", "3", "--max_restarts", "1",
                         "--grace", "2")
    want = [f"RESTART {r} 1" for r in range(3)] + [f"SUM {r} 6.0" for r in range(3)]
    expect(rc, lines, err, 0, want, "rank killed once")
    check("generation 2" in err, "the job re-formed in generation 2")
    check("exitcode -9 (SIGKILL)" in err and "record" not in err, "the killed rank is reported by its signal")


def t_collectives(tmp):
    """dist.barrier(), new_group and monitored_barrier through the relay."""
    rc, lines, err = run(tmp, COLLECTIVES, "--standalone", "--nproc-per-node", "3")
    expect(rc, lines, err, 0, ["COLL 0 3.0", "COLL 1 3.0", "COLL 2 3.0"], "collectives")


def t_error_file(tmp):
    """A worker that raises under @record: its message and traceback are in the launcher's failure message."""
    rc, lines, err = run(tmp, RECORD, "--standalone", "--nproc-per-node", "2")
    check(rc == 1, f"error file: exit status {rc}, want 1")
    ok = check("boom from rank 1" in err and "error_file:" in err and "Traceback" in err,
               "error file: message and traceback shown")
    # Rank 0 may fail too (its barrier's peer is gone) and have an error file of its own.
    paths = [ln.split("error_file: ", 1)[1].strip() for ln in err.splitlines() if "error_file: /" in ln]
    kept = [p for p in paths if os.path.exists(p) and "boom from rank 1" in open(p).read()]
    ok = check(len(kept) == 1, f"error file: kept after the launcher exited ({paths})") and ok
    if paths and os.path.isdir(os.path.dirname(paths[0])):
        shutil.rmtree(os.path.dirname(paths[0]))
    if not ok:
        print("  stderr:", err[-3000:])


def t_bad_input(tmp):
    """Garbage, a huge key and an oversized request to the relay: those connections close, counted; the job runs."""
    rc, lines, err = run(tmp, BAD_INPUT, "--standalone", "--nproc-per-node", "2", "--relay-max-request", "1048576")
    want = ["GARBAGE True", "HUGE_KEY True", "BIG_REQUEST True", "SUM 0 3.0", "SUM 1 3.0"]
    expect(rc, lines, err, 0, want, "bad input")
    check("bad_request 1" in err and "limit_key 1" in err and "limit_request 1" in err,
          "bad input: the relay counts each refusal")


def t_store_api(tmp):
    """torch's TCPStore API against the relay answers as against the listener."""
    rc, lines, err = run(tmp, STORE_API, "--standalone")
    expect(rc, lines, err, 0, ["STORE_API OK"], "store API")


def t_data_dir(tmp):
    """musterd restarted with --data-dir mid-job: the generation breaks, the job re-forms and finishes."""
    data = os.path.join(tmp, "data")
    d = Daemon(tmp, ("--data-dir", data))
    try:
        p = launch(tmp, SLOW, "--url", d.url("dd"), "--nproc-per-node", "2", "--max-restarts", "2", "--grace", "2")
        deadline = time.monotonic() + STEP_S
        while not all(os.path.exists(os.path.join(tmp, f"up.0.{r}")) for r in range(2)):
            if time.monotonic() > deadline or p.poll() is not None:
                break
            time.sleep(0.1)
        d.stop(signal.SIGKILL)
        d.start(d.port)
        rc, lines, err = finish(p)
        ok = expect(rc, lines, err, 0, [], "data dir restart")
        restarts = sorted({ln.split()[2] for ln in lines if ln.startswith("SUM ")})
        ok = check(len(restarts) == 1 and restarts[0] != "0" and
                   sorted(ln.split()[1] for ln in lines if ln.startswith("SUM ")) == ["0", "1"],
                   f"data dir restart: one later attempt finished ({restarts})") and ok
        if not ok:
            print("  stdout:", lines, "\n  stderr:", err[-3000:])
    finally:
        d.stop()


def main():
    global MUSTERD, MUSTER_CLI
    MUSTERD, MUSTER_CLI = sys.argv[1], sys.argv[2]
    tests = [t_hello, t_collectives, t_store_api, t_bad_input, t_error_file, t_restart, t_two_nodes, t_two_jobs,
             t_data_dir]
    only = os.environ.get("MUSTER_TEST_ONLY")
    for t in tests:
        if only and t.__name__ not in only.split(","):
            continue
        before = check.failed
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                t(tmp)
            except Exception as e:  # a check that crashed is a failed check
                check(False, f"{t.__name__} raised {e!r}")
        print(f"{'ok' if check.failed == before else 'FAIL'} {t.__name__} ({time.monotonic() - t0:.1f} s): "
              f"{t.__doc__}", flush=True)
    print(f"{check.count - check.failed} passed, {check.failed} failed")
    sys.exit(1 if check.failed else 0)


if __name__ == "__main__":
    main()
