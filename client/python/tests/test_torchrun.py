"""The torchrun backend: two elastic agents (torch.distributed.run, with
muster.torchrun imported so "muster" is registered: torch 1.13 has no
torchrun.handlers entry points) on one musterd, two workers each; the
workers all-reduce over torch's env:// store and also reach musterd through
MUSTER_URL.  Plus the handler's own calls: closing, scale-up waiting and a
lost member."""

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
LAUNCH = "import muster.torchrun, sys; from torch.distributed.run import main; sys.exit(main())"
AGENT_S = 180


def test_registered_and_entry_point():
    assert entry_point() is create_handler
    assert "muster" in rendezvous_handler_registry._registry


def test_two_agents_two_workers_each(daemon, tmp_path):
    # --redirects/--tee 1: torch 1.13's "0" (Std.NONE) is lost when Python
    # 3.11 iterates the Std flag, and the agent fails to start its workers.
    argv = [sys.executable, "-c", LAUNCH, "--rdzv_backend", "muster", "--rdzv_endpoint",
            f"127.0.0.1:{daemon.port}", "--rdzv_id", "trainjob", "--nnodes", "2", "--nproc_per_node", "2",
            "--max_restarts", "0", "--monitor_interval", "1", "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path / "logs"), TRAIN]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    agents = [subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True) for _ in range(2)]
    outs = []
    try:
        for a in agents:
            outs.append(a.communicate(timeout=AGENT_S)[0])
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    for a, out in zip(agents, outs):
        assert a.returncode == 0, out
    lines = [ln for out in outs for ln in out.splitlines() if "sum=" in ln]
    assert len(lines) == 4, outs
    assert all("world=4 sum=10.0" in ln for ln in lines), lines
    assert all("agent_store=False" in ln or "agent_store=None" in ln for ln in lines), lines
    assert all(f"muster_url=tcp://127.0.0.1:{daemon.port}/trainjob" in ln for ln in lines), lines


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

        h[1].shutdown()  # a member leaves: the others see a loss
        deadline = time.monotonic() + 5
        while not h[0]._lost and time.monotonic() < deadline:
            h[0].num_nodes_waiting()
            time.sleep(0.05)
        assert h[0]._lost and h[0].num_nodes_waiting() >= 1
        store2, rank, world = _info(h[0].next_rendezvous())  # re-form with the newcomer
        t3.join(15)
        assert world == 2 and sorted([rank, late["r"][1]]) == [0, 1]

        assert not h[0].is_closed()
        h[2].set_closed()
        assert h[0].is_closed()
        with pytest.raises(RendezvousClosedError):
            h[0].next_rendezvous()
    finally:
        for x in (h[0], h[2]):
            x.shutdown()
