"""The torchrun backend: two elastic agents started as the README says,
``python3 -m muster.torchrun`` (torch's launcher with "muster" registered:
torch 1.13 has no torchrun.handlers entry points), on one musterd, two
workers each, gloo on CPU; the workers all-reduce over torch's env:// store
and also reach musterd through MUSTER_URL.  Two agents whose job cannot go
on (one's workers keep failing) both end within seconds.  Plus the handler's
own calls: closing, scale-up waiting and a lost member."""

import os
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("torch.distributed.elastic.rendezvous")

import muster  # noqa: E402
from muster.torchrun import MusterRendezvousHandler, entry_point, create_handler  # noqa: E402
from torch.distributed.elastic.rendezvous import RendezvousClosedError, rendezvous_handler_registry  # noqa: E402

TRAIN = os.path.join(os.path.dirname(__file__), "torchrun_train.py")
FAIL = os.path.join(os.path.dirname(__file__), "torchrun_fail.py")
AGENT_S = 180
END_S = 60  # both agents of a job that cannot go on end within this (not torch's 900 s)


def test_registered_and_entry_point():
    assert entry_point() is create_handler
    assert "muster" in rendezvous_handler_registry._registry


def _agents(port, run_id, script, envs, cwd, *extra, bound=AGENT_S):
    """Run one `python3 -m muster.torchrun` agent per env (the README's command,
    with no --redirects/--tee) until all exit; their processes and outputs."""
    argv = [sys.executable, "-m", "muster.torchrun", "--rdzv_backend", "muster", "--rdzv_endpoint",
            f"127.0.0.1:{port}", "--rdzv_id", run_id, "--nnodes", str(len(envs)), "--nproc_per_node", "2",
            "--monitor_interval", "1", *extra, script]
    agents = [subprocess.Popen(argv, env=dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **env),
                               cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for env in envs]
    outs = []
    try:
        for a in agents:
            outs.append(a.communicate(timeout=bound)[0])
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    return agents, outs


def test_std_parsing_mended():
    from torch.distributed.elastic.multiprocessing.api import Std
    import muster.torchrun as tr
    tr._mend_std_parsing()
    assert Std.from_str("0") == Std.NONE and Std.from_str("3") == Std.ALL
    assert Std.from_str("0:3,1:0") == {0: Std.ALL, 1: Std.NONE}
    with pytest.raises(ValueError):
        Std.from_str("9")


def test_two_agents_two_workers_each(daemon, tmp_path):
    # torch 1.13 under Python 3.11 cannot parse the default --redirects/--tee
    # 0 by itself; python3 -m muster.torchrun mends that.
    agents, outs = _agents(daemon.port, "trainjob", TRAIN, [{}, {}], tmp_path, "--max_restarts", "0")
    for a, out in zip(agents, outs):
        assert a.returncode == 0, out
    lines = [ln for out in outs for ln in out.splitlines() if "sum=" in ln]
    assert len(lines) == 4, outs
    assert all("world=4 sum=10.0" in ln for ln in lines), lines
    assert all("agent_store=False" in ln or "agent_store=None" in ln for ln in lines), lines
    assert all(f"muster_url=tcp://127.0.0.1:{daemon.port}/trainjob" in ln for ln in lines), lines


def test_job_that_cannot_go_on_ends_within_seconds(daemon, tmp_path):
    # One agent's workers fail, the other's succeed.  The failing agent
    # restarts and joins the next round, which can never close; the other
    # waits in torch's exit barrier for it.  Both used to wait out the store
    # timeout (900 s) and the join timeout (600 s).
    t0 = time.monotonic()
    agents, outs = _agents(daemon.port, "failjob", FAIL, [{"MUSTER_TEST_FAIL": "1"}, {}], tmp_path,
                           "--max_restarts", "1", bound=END_S)
    took = time.monotonic() - t0
    assert took < END_S, outs
    assert agents[0].returncode != 0, outs[0]
    assert "RendezvousClosedError" in outs[0], outs[0]
    assert agents[1].returncode == 0, outs[1]


def test_agent_in_exit_barrier_ends_on_sigterm(daemon, tmp_path):
    # The first agent's workers are done and it waits in torch's exit barrier
    # for the second's, which sleep: SIGTERM ends it within seconds (the
    # store's waits are short, so the agent's signal handler runs).
    argv = [sys.executable, "-m", "muster.torchrun", "--rdzv_backend", "muster", "--rdzv_endpoint",
            f"127.0.0.1:{daemon.port}", "--rdzv_id", "termjob", "--nnodes", "2", "--nproc_per_node", "1",
            "--max_restarts", "0", "--monitor_interval", "1", FAIL]
    agents = [subprocess.Popen(argv, env=dict(os.environ, **env), cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
              for env in ({}, {"MUSTER_TEST_SLEEP": "120"})]
    try:
        with muster.connect(daemon.url("termjob"), timeout=30) as c:
            c.get(muster._core.KEY_RDZV_GENERATION, wait=True, timeout=30)  # the round closed
        time.sleep(5)  # the first agent's worker has exited and the agent is in the exit barrier
        assert agents[0].poll() is None
        t0 = time.monotonic()
        agents[0].terminate()
        out = agents[0].communicate(timeout=END_S)[0]
        assert time.monotonic() - t0 < 10, out
        assert "Got termination signal" in out, out  # logged by torch's exit barrier
    finally:
        for a in agents:
            if a.poll() is None:
                a.terminate()
                try:
                    a.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    a.kill()
                    a.wait()


def _info(r):
    """(store, rank, world_size) of next_rendezvous()'s answer: a tuple before
    torch 2.4, a RendezvousInfo from then on."""
    if isinstance(r, tuple):
        return r
    return r.store, r.rank, r.world_size


def _handler(daemon, node_id, nmin=2, nmax=3):
    return MusterRendezvousHandler(daemon.url("elastic"), "elastic", nmin, nmax, join_timeout=10,
                                   last_call_timeout=0.3, store_timeout=10, node_id=node_id)


def test_handler_waiting_loss_and_close(start_daemon):
    d = start_daemon("--heartbeat-timeout", "1000")
    h = [_handler(d, f"node{i}") for i in range(3)]
    try:
        got = [None] * 2
        ts = [threading.Thread(target=lambda i=i: got.__setitem__(i, _info(h[i].next_rendezvous()))) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(15)
        ranks = sorted((r[1], r[2]) for r in got)
        assert ranks == [(0, 2), (1, 2)]
        store = got[0][0]
        store.set("k", "v")
        assert got[1][0].get("k") == b"v"
        assert h[0].num_nodes_waiting() == 0

        late = {}
        t3 = threading.Thread(target=lambda: late.setdefault("r", _info(h[2].next_rendezvous())))
        t3.start()
        deadline = time.monotonic() + 5
        while h[0].num_nodes_waiting() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert h[0].num_nodes_waiting() == 1  # scale-up: the agent would restart

        h[1]._node.close()  # a member is lost: the others see it
        deadline = time.monotonic() + 5
        while not h[0]._lost and time.monotonic() < deadline:
            h[0].num_nodes_waiting()
            time.sleep(0.05)
        assert h[0]._lost and h[0].num_nodes_waiting() >= 1
        store2, rank, world = _info(h[0].next_rendezvous())  # re-form with the newcomer
        t3.join(15)
        assert world == 2 and sorted([rank, late["r"][1]]) == [0, 1]

        assert not h[0].is_closed()
        h[2].shutdown()  # an agent that ends closes the run, as torch's c10d backend does
        assert h[0].is_closed()
        with pytest.raises(RendezvousClosedError):
            h[0].next_rendezvous()
        fresh = _handler(d, "node9")  # a new launch with the same run id starts afresh
        assert not fresh.is_closed()
        fresh.shutdown()
    finally:
        for x in (h[0], h[1], h[2]):
            x.shutdown()
