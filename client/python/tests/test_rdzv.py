"""muster.rdzv against a real musterd: a round of 3 nodes assigns ranks,
heartbeats keep the generation alive past the server's heartbeat timeout, a
leaving node breaks the generation for the others (member_lost), a newcomer
shows up as node_waiting, and the members re-form with it."""

import threading
import time

import pytest

import muster
from muster.rdzv import Node


def _join_all(nodes, timeout=10):
    out = [None] * len(nodes)

    def run(i):
        out[i] = nodes[i].join(timeout=timeout)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(nodes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    return out


def _event(node, kind, timeout=5):
    """The first event of kind within timeout (others are skipped), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = node.next_event(timeout=max(0.01, deadline - time.monotonic()))
        if ev is not None and ev.kind == kind:
            return ev
    return None


def test_round_heartbeats_loss_and_reform(start_daemon):
    d = start_daemon("--heartbeat-timeout", "600")
    url = d.url("job")
    nodes = [Node(url, node_id=f"n{i}", local_world_size=2, min_nodes=3, max_nodes=4, last_call=0.2,
                  timeout=10) for i in range(3)]
    try:
        a = _join_all(nodes)
        assert [x.node_rank for x in a] == [0, 1, 2]
        assert {x.generation for x in a} == {a[0].generation}
        assert [x.rank_start for x in a] == [0, 2, 4] and a[0].world_size == 6 and a[0].num_nodes == 3
        time.sleep(1.5)  # > 2 heartbeat timeouts: the threads kept the members alive
        assert all(n.next_event(timeout=0) is None for n in nodes)
        for n in nodes:
            n.heartbeat()

        newcomer = Node(url, node_id="n3", local_world_size=2, min_nodes=3, max_nodes=4, last_call=0.2, timeout=10)
        res = {}
        t = threading.Thread(target=lambda: res.setdefault("a", newcomer.join(timeout=10)))
        t.start()
        ev = _event(nodes[0], muster.Event.NODE_WAITING)
        assert ev is not None and ev.node_id == "n3" and ev.generation == a[0].generation

        nodes[2].leave()
        for n in nodes[:2]:
            ev = _event(n, muster.Event.MEMBER_LOST)
            assert ev is not None and ev.generation == a[0].generation
        with pytest.raises(muster.Stale):
            nodes[0].heartbeat()

        b = _join_all(nodes[:2])
        t.join(15)
        b.append(res["a"])
        assert [x.node_id for x in b] == ["n0", "n1", "n3"]
        assert {x.generation for x in b} == {b[0].generation} and b[0].generation > a[0].generation
        assert sorted(x.node_rank for x in b) == [0, 1, 2]
        newcomer.close()
    finally:
        for n in nodes:
            n.close()


def test_join_conflict_and_timeout(daemon):
    url = daemon.url("job2")
    with Node(url, node_id="a", min_nodes=2, max_nodes=2, timeout=5) as first:
        res = {}
        t = threading.Thread(target=lambda: res.setdefault("e", pytest.raises(muster.Timeout, first.join,
                                                                               timeout=1)))
        t.start()
        time.sleep(0.2)
        with Node(url, node_id="b", min_nodes=3, max_nodes=3, timeout=5) as other:
            with pytest.raises(muster.Conflict):
                other.join(timeout=1)
        t.join(5)
        assert res["e"].value.retryable
