"""muster.torch in place (muster/inplace.py) under real `muster run --recovery
in-place` launchers and a real musterd, with examples/torch_inplace.py on
gloo: the survivors of a lost node, of two lost at once, with a standby
admitted and with a worker replaced finish in the processes they started in,
every rank of a generation prints the new rank 0's checksum, a rank whose
abort hangs exits within its deadline and is replaced, and outside `muster
run` it is torch's own init_process_group.  Skipped without torch or
without the CLI ($MUSTER_TEST_CLI)."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

ROOT = os.environ.get("MUSTER_TEST_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "torch_inplace.py")
LINE = re.compile(r"\[Rank (\d+)\] pid (\d+) generation (\d+) world (\d+) iteration (\d+): sum ([\d.]+) "
                  r"checksum (-?[\d.]+)")
FINISHED = re.compile(r"\[Rank (\d+)\] pid (\d+) finished (\d+) iterations: world (\d+)")
STEPS = 24
START_S = 60    # every node reached iteration 3
END_S = 90      # every survivor finished after the loss


def _cli():
    cli = os.environ.get("MUSTER_TEST_CLI")
    if not cli:
        pytest.skip("MUSTER_TEST_CLI is not set")
    return cli


class Node:
    """One `muster run --recovery in-place` launcher of one rank."""

    def __init__(self, url, i, tmp, nnodes, *extra, env=None, script=EXAMPLE):
        self.out = tmp / f"n{i}.out"
        self.err = tmp / f"n{i}.err"
        e = dict(os.environ, MUSTER_DEMO_ITERATIONS=str(STEPS), MUSTER_DEMO_INTERVAL_MS="100", **(env or {}))
        argv = [_cli(), "--url", url, "run", "--nnodes", nnodes, "--nproc-per-node", "1", "--recovery", "in-place",
                "--max-restarts", "3", "--node-id", f"n{i}", "--last-call", "1000", *extra,
                sys.executable, script]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, env=e, start_new_session=True)

    def lines(self):
        return [LINE.match(x).groups() for x in self.out.read_text().splitlines() if LINE.match(x)]

    def finished(self):
        return [FINISHED.match(x).groups() for x in self.out.read_text().splitlines() if FINISHED.match(x)]

    def reached(self, it):
        return any(int(g[4]) >= it for g in self.lines())

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, s):
        try:
            return self.proc.wait(s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            return None


def _start(url, tmp, n, nnodes, env=None):
    nodes = [Node(url, i, tmp, nnodes, env=env) for i in range(n)]
    end = time.monotonic() + START_S
    while not all(x.reached(3) for x in nodes):
        assert time.monotonic() < end, "the job did not start:\n" + "\n".join(x.err.read_text() for x in nodes)
        assert all(x.proc.poll() is None for x in nodes), "a launcher exited before the loss"
        time.sleep(0.1)
    return nodes


def _check_survivors(survivors, world):
    """Each survivor kept its process, finished with world ranks, and each generation's checksums agree."""
    by_gen = {}
    for x in survivors:
        assert x.wait(END_S) == 0, x.err.read_text()
        pids = {g[1] for g in x.lines()}
        assert len(pids) == 1, f"{x.out}: more than one process: {pids}"
        fin = x.finished()
        assert fin and int(fin[-1][3]) == world and int(fin[-1][2]) == STEPS, x.out.read_text()
        for g in x.lines():
            by_gen.setdefault((g[2], g[4]), set()).add(g[6])
            assert float(g[5]) == int(g[3]) * (int(g[3]) + 1) / 2, g
    for key, sums in by_gen.items():
        assert len(sums) == 1, f"generation {key[0]} iteration {key[1]}: checksums differ: {sums}"
    last = max(int(g[2]) for x in survivors for g in x.lines())
    assert last > 1, "no recovery happened"
    return last


def test_one_node_lost(daemon, tmp_path):
    nodes = _start(daemon.url(), tmp_path, 4, "3:4")
    nodes[1].kill()
    _check_survivors([nodes[0], nodes[2], nodes[3]], 3)


def test_two_nodes_lost_at_once(daemon, tmp_path):
    nodes = _start(daemon.url(), tmp_path, 4, "2:4")
    nodes[1].kill()
    nodes[2].kill()
    _check_survivors([nodes[0], nodes[3]], 2)


def test_standby_admitted(daemon, tmp_path):
    url = daemon.url()
    nodes = _start(url, tmp_path, 4, "3:4")
    spare = Node(url, 4, tmp_path, "3:4", "--standby")
    time.sleep(1)
    assert not spare.lines(), "a standby started a worker before any loss"
    nodes[1].kill()
    _check_survivors([nodes[0], nodes[2], nodes[3]], 4)
    assert spare.wait(END_S) == 0, spare.err.read_text()
    assert spare.finished() and int(spare.finished()[-1][3]) == 4


def test_worker_replaced(daemon, tmp_path):
    nodes = _start(daemon.url(), tmp_path, 3, "3:3")
    victim = nodes[1].lines()[0][1]
    os.kill(int(victim), signal.SIGKILL)
    _check_survivors([nodes[0], nodes[2]], 3)
    assert nodes[1].wait(END_S) == 0, nodes[1].err.read_text()
    assert nodes[1].finished()[-1][1] != victim


def test_stuck_abort_exits_and_is_replaced(daemon, tmp_path):
    """A rank whose abort never returns exits within its deadline (EXIT_STUCK) instead of hanging; its
    launcher replaces it, and the job finishes with the nodes left."""
    url = daemon.url()
    nodes = [Node(url, i, tmp_path, "2:3") for i in range(2)]
    nodes.append(Node(url, 2, tmp_path, "2:3", env={"MUSTER_TORCH_TEST_HANG_ABORT": "1",
                                                    "MUSTER_TORCH_ABORT_TIMEOUT": "2"}))
    end = time.monotonic() + START_S
    while not all(x.reached(3) for x in nodes):
        assert time.monotonic() < end, "the job did not start"
        time.sleep(0.1)
    first = nodes[2].lines()[0][1]
    t0 = time.monotonic()
    nodes[1].kill()
    for x in (nodes[0], nodes[2]):
        assert x.wait(END_S) == 0, x.err.read_text()
        assert int(x.finished()[-1][3]) == 2
    assert "did not return within 2.0 s" in nodes[2].err.read_text()
    assert nodes[2].finished()[-1][1] != first, "the stuck rank was not replaced"
    assert len({g[1] for g in nodes[0].lines()}) == 1, "the healthy survivor changed process"
    assert time.monotonic() - t0 < END_S


def test_not_in_place_is_plain():
    """Without `muster run`, init_process_group is torch's own (a world of one over a FileStore)."""
    code = ("import muster.torch as mt, torch.distributed as dist, tempfile, os\n"
            "os.environ.pop('MUSTER_NODE_ID', None)\n"
            "f = tempfile.mktemp()\n"
            "mt.init_process_group('gloo', init_method='file://' + f, rank=0, world_size=1)\n"
            "print(dist.get_world_size(), mt.generation())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUSTER_NODE_ID", "MUSTER_GENERATION")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0"]


def test_plain_script_restarts_and_says_so(daemon, tmp_path):
    """A script that never opens the world (no muster.torch) cannot stay in place: at the loss each
    surviving node says so once and recovers as --recovery restart does, with new processes, and the
    job finishes with the nodes left; nothing hangs."""
    url = daemon.url()
    script = os.path.join(os.path.dirname(__file__), "plain_loop.py")
    nodes = [Node(url, i, tmp_path, "2:3", script=script) for i in range(3)]
    end = time.monotonic() + START_S
    while not all("iteration 3:" in x.out.read_text() for x in nodes):
        assert time.monotonic() < end, "the job did not start:\n" + "\n".join(x.err.read_text() for x in nodes)
        time.sleep(0.1)
    first = {i: re.search(r"pid (\d+)", nodes[i].out.read_text()).group(1) for i in (0, 2)}
    nodes[1].kill()
    for i in (0, 2):
        x = nodes[i]
        assert x.wait(END_S) == 0, x.err.read_text()
        assert x.err.read_text().count("never opened the world") == 1, x.err.read_text()
        last = x.out.read_text().splitlines()[-1]
        assert "finished" in last and last.endswith("world 2"), last
        assert f"pid {first[i]} finished" not in last, "the worker was not restarted"



FAILS_AFTER_CHANGE = '''
import os, time
import torch, torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
import muster.torch as mt


@record
def main():
    mt.init_process_group("gloo")
    t = torch.zeros(1)
    while True:
        with mt.step():
            dist.all_reduce(t)
            print(f"[Rank {dist.get_rank()}] pid {os.getpid()} generation {mt.generation()} "
                  f"world {dist.get_world_size()} iteration {mt.iteration() + 1}: sum 0.0 checksum 0.0", flush=True)
        if mt.generation() > 1 and dist.get_rank() == 0:
            raise RuntimeError("failed after the world changed")
        time.sleep(0.1)


main()
'''


def test_kept_worker_error_file(daemon, tmp_path):
    # A worker kept in place across a world change writes the error file its environment named when it
    # started (generation 1); the launcher's failure report must show that file, not the current one.
    script = tmp_path / "fails_after_change.py"
    script.write_text(FAILS_AFTER_CHANGE)
    url = daemon.url()
    nodes = [Node(url, i, tmp_path, "2:3", script=str(script)) for i in range(3)]
    end = time.monotonic() + START_S
    while not all(x.reached(3) for x in nodes):
        assert time.monotonic() < end, "the job did not start:\n" + "\n".join(x.err.read_text() for x in nodes)
        time.sleep(0.1)
    nodes[1].kill()
    end = time.monotonic() + END_S
    while "error_file:" not in nodes[0].err.read_text():
        assert time.monotonic() < end, nodes[0].err.read_text()
        time.sleep(0.2)
    err = nodes[0].err.read_text()
    report = err.split("error_file:", 1)[1]
    assert report.split("\n", 1)[0].strip().endswith("error-g1-r0.json"), err
    assert "failed after the world changed" in report, err
    for x in nodes:
        x.wait(1)
