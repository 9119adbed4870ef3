"""Unmodified torch.distributed clients against musterd's TCPStore listener.

Usage: test_torch.py MUSTERD MUSTER_CLI

With TCPSTORE_TEST_TARGET=relay the store checks run against the relay that
`muster run` hosts for its workers instead (in front of the check's own
musterd, keys under the generation's prefix), so both servers answer torch
alike.

Runs under whatever torch the interpreter has: Debian's 1.13 speaks the old
numbering, torch 2.1 and later the VALIDATE era.  Every check starts its own
musterd on 127.0.0.1 port 0 (--port-file, --tcpstore-port-file) and every
wait is bounded.  Prints one line per check and exits 1 if any failed.
"""

import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
NS = "tcpstore"  # the listener's default namespace
STEP_S = 120     # bound on any one child process


class Daemon:
    """A musterd with a TCPStore listener, both on port 0."""

    def __init__(self, musterd, tmp, extra=()):
        self.dir = tempfile.mkdtemp(dir=tmp)
        port_file = os.path.join(self.dir, "port")
        ts_file = os.path.join(self.dir, "tsport")
        self.log = os.path.join(self.dir, "musterd.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [musterd, "--listen", f"{HOST}:0", "--port-file", port_file,
                 "--tcpstore-listen", f"{HOST}:0", "--tcpstore-port-file", ts_file, *extra],
                stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("musterd did not start; log:\n" + open(self.log).read())
            time.sleep(0.02)
        self.port = int(open(port_file).read())
        self.tsport = int(open(ts_file).read())
        self.url = f"tcp://{HOST}:{self.port}/{NS}"

    def stop(self):
        """SIGTERM and reap; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode

    def key(self, k):
        """The native key of torch key k (the listener stores it as is)."""
        return k

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


RELAY_WORKER = """#!/bin/sh
echo "$MASTER_PORT $MUSTER_GENERATION" > "$TST_DIR/relay.tmp" && mv "$TST_DIR/relay.tmp" "$TST_DIR/relayport"
i=0; while [ ! -e "$TST_DIR/stop" ] && [ $i -lt 6000 ]; do sleep 0.02; i=$((i + 1)); done
"""


class RelayDaemon(Daemon):
    """A musterd with `muster run`'s relay in front: tsport is the relay's, keys live under torch/<gen>/."""

    def __init__(self, musterd, tmp):
        super().__init__(musterd, tmp)
        self.url = f"tcp://{HOST}:{self.port}/relayjob"
        script = os.path.join(self.dir, "worker.sh")
        with open(script, "w") as f:
            f.write(RELAY_WORKER)
        os.chmod(script, 0o755)
        env = dict(os.environ, TST_DIR=self.dir)
        env.pop("MUSTER_URL", None)
        self.launcher_log = open(os.path.join(self.dir, "launcher.log"), "w")
        self.launcher = subprocess.Popen(
            [MUSTER_CLI, "run", "--url", self.url, "--nproc-per-node", "1", "--max-restarts", "0", script],
            stdout=self.launcher_log, stderr=self.launcher_log, env=env)
        port_file = os.path.join(self.dir, "relayport")
        deadline = time.monotonic() + 15
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.launcher.poll() is not None:
                raise RuntimeError("the relay's launcher did not start")
            time.sleep(0.02)
        port, gen = open(port_file).read().split()
        self.tsport, self.prefix = int(port), f"torch/{gen}/"

    def key(self, k):
        """The native key of torch key k: under the generation's prefix."""
        return self.prefix + k

    def stop(self):
        """Let the worker end, reap the launcher, then stop musterd; the launcher's failure is musterd's."""
        if self.launcher.poll() is None:
            open(os.path.join(self.dir, "stop"), "w").close()
            try:
                self.launcher.wait(20)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
                self.launcher.wait()
        status = super().stop()
        return status or self.launcher.returncode


class Checks:
    """Counts checks; prints failures with what was expected."""

    def __init__(self):
        self.failed = 0
        self.count = 0

    def __call__(self, ok, what):
        self.count += 1
        if not ok:
            self.failed += 1
            print(f"  FAIL {what}", flush=True)
        return ok

    def eq(self, got, want, what):
        return self(got == want, f"{what}: got {got!r}, want {want!r}")


check = Checks()


def store(port, timeout_s=10, **kw):
    """A plain TCPStore client of musterd (nothing in the process listens)."""
    import torch.distributed as dist
    return dist.TCPStore(HOST, port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s), **kw)


def cli(daemon, *args, stdin=None):
    """Run the muster CLI against the listener's namespace; (exit code, stdout bytes)."""
    r = subprocess.run([MUSTER_CLI, "--url", daemon.url, "--timeout", "10000", *args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=STEP_S)
    if r.returncode not in (0, 1):
        print("  muster", *args, "->", r.returncode, r.stderr.decode(errors="replace").strip())
    return r.returncode, r.stdout


def timed_out(fn):
    """Whether fn raised a timeout error (torch words it differently by version)."""
    try:
        fn()
    except RuntimeError as e:  # DistStoreError is a RuntimeError
        return "timeout" in str(e).lower()
    return False


def t_store_api(d):
    """set/get/add/compare_set/wait with a timeout (then the store still works)/delete/num_keys."""
    s = store(d.tsport)
    s.set("foo", "bar")
    check.eq(s.get("foo"), b"bar", "get after set")
    check.eq(s.add("cnt", 5), 5, "add")
    check.eq(s.add("cnt", 2), 7, "add again")
    check.eq(s.get("cnt"), b"7", "add is stored as decimal text")
    check.eq(s.compare_set("cs", "", "v1"), b"v1", "compare_set creates on empty expected")
    check.eq(s.compare_set("cs", "v1", "v2"), b"v2", "compare_set swaps on match")
    check.eq(s.compare_set("cs", "zz", "v3"), b"v2", "compare_set answers current on mismatch")
    check.eq(s.compare_set("cs-missing", "x", "y"), b"x", "compare_set answers expected on a missing key")
    check.eq(s.num_keys(), 3, "num_keys (foo, cnt, cs)")
    check(timed_out(lambda: s.wait(["late"], datetime.timedelta(milliseconds=300))), "wait on a missing key times out")
    s.set("after", "1")
    other = store(d.tsport)
    other.set("late", "now")  # the timed-out wait must owe this client nothing
    check.eq(s.add("cnt", 1), 8, "add after a timed-out wait and a late set")
    check.eq(s.get("late"), b"now", "get after a timed-out wait")
    s.set_timeout(datetime.timedelta(milliseconds=300))
    check(timed_out(lambda: s.get("never")), "get of a missing key times out")
    s.set_timeout(datetime.timedelta(seconds=10))
    check.eq(s.add("cnt", 1), 9, "add after a timed-out get")
    s.wait(["foo", "late"])
    check(s.delete_key("foo") is True, "delete_key of a present key")
    check(s.delete_key("foo") is False, "delete_key of an absent key")
    check.eq(s.num_keys(), 4, "num_keys after delete (cnt, cs, after, late)")
    if hasattr(s, "check"):
        check(s.check(["cnt", "cs"]) is True, "check of present keys")
        check(s.check(["cnt", "never"]) is False, "check with a missing key")
    else:
        print("  (this torch has no TCPStore.check; the wire op is covered by the C tests)")


def t_extended_api(d):
    """append, multi_get/multi_set, queues, list_keys, barrier: whichever this torch has."""
    s = store(d.tsport)
    done = []
    if hasattr(s, "append"):
        s.append("ap", "ab")
        s.append("ap", "cd")
        check.eq(s.get("ap"), b"abcd", "append")
        done.append("append")
    if hasattr(s, "multi_set"):
        s.multi_set(["m1", "m2"], ["one", "two"])
        check.eq(s.multi_get(["m2", "m1"]), [b"two", b"one"], "multi_get")
        done.append("multi_get/multi_set")
    if hasattr(s, "queue_push"):
        s.queue_push("q", "a")
        s.queue_push("q", "b")
        check.eq(s.queue_len("q"), 2, "queue_len")
        check.eq(s.queue_pop("q"), b"a", "queue_pop is FIFO")
        check.eq(s.queue_pop("q", block=False), b"b", "non-blocking queue_pop")
        check.eq(s.queue_len("q"), 0, "queue empty again")
        done.append("queues")
    if hasattr(s, "list_keys"):
        keys = s.list_keys()
        check("ap" in keys or "append" not in done, f"list_keys has ap: {keys}")
        done.append("list_keys")
    if hasattr(s, "barrier"):
        s.barrier("bar", 1)
        done.append("barrier")
    print("  extended API exercised:", ", ".join(done) or "none in this torch")


def t_init_key(d):
    """Clients given a world_size each add 1 to the unprefixed init/ key."""
    a = store(d.tsport, world_size=2)
    b = store(d.tsport, world_size=2)
    rc, out = cli(d, "get", d.key("init/"))
    check.eq((rc, out), (0, b"2"), "init/ counts the two clients, read by the CLI")
    del a, b


def t_cli_exchange(d):
    """A torch worker and the muster CLI exchange keys: torch prefixes user keys with '/'."""
    s = store(d.tsport)
    s.set("from_torch", "hello from torch")
    check.eq(cli(d, "get", d.key("/from_torch")), (0, b"hello from torch"), "CLI reads what torch set")
    check.eq(cli(d, "set", d.key("/from_cli"), "hi from muster")[0], 0, "CLI set")
    check.eq(s.get("from_cli"), b"hi from muster", "torch reads what the CLI set")
    s.add("shared", 3)
    rc, out = cli(d, "add", d.key("/shared"), "4")
    check.eq((rc, out.strip()), (0, b"7"), "CLI add on torch's counter")
    check.eq(s.add("shared", 0), 7, "torch add sees the CLI's add")


def worker(mode, rank, world, port):
    """A child process: one rank of a gloo job, or one torch waiter."""
    import torch
    import torch.distributed as dist
    if mode == "wait":
        s = store(port, timeout_s=60)
        s.wait(["go"])
        print(f"rank {rank} released: {s.get('go').decode()}", flush=True)
        return 0
    if mode == "gloo":
        s = store(port, timeout_s=60)
        dist.init_process_group("gloo", store=s, rank=rank, world_size=world)
    else:  # env:// with every rank a client of the agent store
        dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} sum {t.item()}", flush=True)
    dist.destroy_process_group()
    return 0


def spawn(mode, world, port, env=None):
    """Start world children of this script in mode; returns the Popen list."""
    procs = []
    for r in range(world):
        e = dict(os.environ, **(env or {}))
        if mode == "env":
            e.update(RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR=HOST, MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", mode, str(r), str(world), str(port)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e))
    return procs


def reap(procs, what):
    """Wait for every child (bounded); returns their outputs, checking they exited 0."""
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=STEP_S)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        text = out.decode(errors="replace")
        if not check(p.returncode == 0, f"{what}: child exited {p.returncode}"):
            print(text)
        outs.append(text)
    return outs


def t_gloo(d, world=3):
    """init_process_group('gloo', store=TCPStore client, ...) on several processes, then an all-reduce."""
    outs = reap(spawn("gloo", world, d.tsport), "gloo")
    want = float(world * (world + 1) // 2)
    for r, out in enumerate(outs):
        check(f"sum {want}" in out, f"gloo rank {r} all-reduced to {want}: {out.strip()[-200:]}")


def t_env_agent_store(d, world=2):
    """env:// with TORCHELASTIC_USE_AGENT_STORE=True: every rank is a client of musterd."""
    env = {"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0"}
    outs = reap(spawn("env", world, d.tsport, env), "env://")
    want = float(world * (world + 1) // 2)
    for r, out in enumerate(outs):
        check(f"sum {want}" in out, f"env:// rank {r} all-reduced to {want}: {out.strip()[-200:]}")


def t_native_releases_waiters(d, n=3):
    """Torch processes parked in wait() are released by a native client's set."""
    procs = spawn("wait", n, d.tsport)
    deadline = time.monotonic() + STEP_S
    # Until all n are parked (a relay parks its node's waits of one key as one or two at musterd).
    want = 1 if isinstance(d, RelayDaemon) else n
    while time.monotonic() < deadline and _parked(d) < want:
        time.sleep(0.2)
    if want < n:
        time.sleep(1)
    check.eq(cli(d, "set", d.key("/go"), "from muster")[0], 0, "CLI set of the key torch waits on")
    for r, out in enumerate(reap(procs, "waiters")):
        check("released: from muster" in out, f"waiter {r} released by the CLI: {out.strip()[-200:]}")


def _parked(d):
    """Parked waits right now, from the daemon's counters (SIGUSR1 dump)."""
    before = open(d.log).read().count("stats end")
    d.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = open(d.log).read()
        if text.count("stats end") > before:
            dump = text[text.rfind("stats begin"):]
            vals = {}
            for line in dump.splitlines():
                if " stat " in line and "=" in line:
                    k, v = line.split(" stat ", 1)[1].split("=", 1)
                    vals[k] = int(v)
            return vals.get("waits_parked", 0) - vals.get("waits_woken", 0) - vals.get("waits_canceled", 0)
        time.sleep(0.02)
    return 0


def t_torchrun(d):
    """torchrun's c10d rendezvous with --rdzv_endpoint at musterd (the agent is only a client)."""
    script = os.path.join(d.dir, "job.py")
    with open(script, "w") as f:
        # Both workers share the agent's stdout: one os.write of a short line is atomic on a pipe,
        # where print() may hand the words over separately and interleave them with the other rank's.
        f.write("import os, torch, torch.distributed as dist\n"
                "dist.init_process_group('gloo')\n"
                "t = torch.tensor([float(dist.get_rank() + 1)])\n"
                "dist.all_reduce(t)\n"
                "os.write(1, f'rank {dist.get_rank()} sum {t.item()}\\n'.encode())\n")
    for attempt in range(2):
        # A fresh run id per attempt: a failed agent closes its rendezvous for good.
        run_id = f"job7-{attempt}"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
               "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{HOST}:{d.tsport}", "--rdzv_id", run_id,
               "--rdzv_conf", "is_host=false", "--max_restarts", "0",
               # Debian's 1.13 under Python 3.11 cannot parse the default "0" here; 2 works everywhere.
               "--redirects", "2", "--tee", "2", script]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=STEP_S)
        out = r.stdout.decode(errors="replace")
        # torch 1.13's agent picks the workers' MASTER_PORT by binding port 0 and closing it; under a
        # parallel test run another process can take that port before rank 0 binds it (torch's race,
        # not the store's), so that one failure is tried once more.
        if r.returncode == 0 or "Address already in use" not in out:
            break
    ok = check(r.returncode == 0 and "rank 0 sum 3.0" in out and "rank 1 sum 3.0" in out,
               "torchrun job all-reduced to 3.0 on both ranks")
    rc, keys = cli(d, "keys", f"/torch.rendezvous.{run_id}")
    ok = check(rc == 0 and f"/torch.rendezvous.{run_id}".encode() in keys,
               f"rendezvous state is in musterd: {keys!r}") and ok
    if not ok:
        print(out[-3000:])


CHECKS = [t_store_api, t_extended_api, t_init_key, t_cli_exchange, t_gloo, t_env_agent_store,
          t_native_releases_waiters, t_torchrun]
# Through the relay: the store checks (agent stores and torchrun bring stores of their own).
RELAY_CHECKS = [t_store_api, t_extended_api, t_init_key, t_cli_exchange, t_gloo, t_native_releases_waiters]


def main():
    global MUSTER_CLI
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    musterd, MUSTER_CLI = sys.argv[1], sys.argv[2]
    import torch
    print(f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}", flush=True)
    only = os.environ.get("TCPSTORE_TEST_ONLY", "").split(",")
    relay = os.environ.get("TCPSTORE_TEST_TARGET") == "relay"
    with tempfile.TemporaryDirectory(prefix="muster-torch-") as tmp:
        for fn in RELAY_CHECKS if relay else CHECKS:
            if only != [""] and fn.__name__ not in only:
                continue
            before, t0 = check.failed, time.monotonic()
            with (RelayDaemon if relay else Daemon)(musterd, tmp) as d:
                try:
                    fn(d)
                except Exception as e:  # a torch error is a failed check, not a crash of the run
                    check(False, f"{fn.__name__} raised {type(e).__name__}: {e}")
                status = d.stop()
                check.eq(status, 0, f"{fn.__name__}: musterd exit status")
                if check.failed != before:
                    print(open(d.log).read()[-4000:])
            print(f"{'ok  ' if check.failed == before else 'FAIL'} {fn.__name__} ({time.monotonic() - t0:.1f} s)",
                  flush=True)
    print(f"test_torch: {check.count} checks, {check.failed} failed")
    return 1 if check.failed else 0


MUSTER_CLI = None

if __name__ == "__main__":
    sys.exit(main())
