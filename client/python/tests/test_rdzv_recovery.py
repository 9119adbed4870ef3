"""Recovery rounds through muster.rdzv.Node against a real musterd.

Four nodes in separate processes (rdzv_recover_worker.py) form a
generation with a standby waiting; one is killed with SIGKILL and the three
survivors recover(): all four (the standby admitted after them) receive the
same generation, member order (old ranks kept) and excluded list.  Then two
survivors report another as failed (one report alone is a vote that is
held): the rest recover again and the reported node gets muster.Excluded.  In one process: bad input (a report of a
non-member, an empty id, recover() while the generation runs or without a
membership) raises clearly; and a Node that armed its recovery gets its
answer with the loss event."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

import muster
from muster.rdzv import ExcludedMember, Node

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdzv_recover_worker.py")
READ_S = 20  # each worker's next line must come within this


class Worker:
    """A node process and the JSON lines it prints (read by a thread)."""

    def __init__(self, url, node_id, max_nodes, standby=False):
        argv = [sys.executable, WORKER, url, node_id, str(max_nodes)] + (["--standby"] if standby else [])
        self.node_id = node_id
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        """Queue each line of the worker's stdout, parsed."""
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def next(self, what=None):
        """The worker's next line (of kind what, others skipped) within READ_S; fails the test otherwise."""
        deadline = time.monotonic() + READ_S
        while time.monotonic() < deadline:
            try:
                msg = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            assert msg is not None, f"{self.node_id} exited: {self.proc.stderr.read()}"
            if what is None or msg["what"] == what or "error" in msg:
                return msg
        pytest.fail(f"{self.node_id} said nothing within {READ_S} s")

    def send(self, line):
        """One command line on the worker's stdin."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self):
        """SIGKILL and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        """Ask it to exit; SIGKILL when it does not within 10 s."""
        if self.proc.poll() is None:
            try:
                self.send("exit")
                self.proc.wait(10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.kill()


def _agreed(answers):
    """What every node of a round must agree on, from one answer."""
    return answers["generation"], answers["previous_generation"], answers["members"], answers["excluded"]


def test_sigkill_survivors_recover_in_order_with_standby(start_daemon):
    d = start_daemon("--recovery-timeout", "10000", "--heartbeat-timeout", "900")
    url = d.url("job")
    workers = [Worker(url, f"w{i}", 4) for i in range(4)]
    spare = None
    try:
        first = [w.next("assignment") for w in workers]
        g1 = first[0]["generation"]
        assert [a["node_rank"] for a in first] == [0, 1, 2, 3]
        assert all(_agreed(a) == (g1, 0, first[0]["members"], []) for a in first)
        assert all(a["old_node_rank"] is None for a in first)

        spare = Worker(url, "spare", 4, standby=True)
        assert spare.next()["what"] == "joining"
        time.sleep(0.5)  # its join is parked as a standby by now

        workers[1].kill()
        survivors = [workers[0], workers[2], workers[3]]
        second = [w.next("assignment") for w in survivors + [spare]]
        for a in second:
            assert "error" not in a, a
            assert _agreed(a) == _agreed(second[0])
        g2 = second[0]["generation"]
        assert g2 == g1 + 1 and second[0]["previous_generation"] == g1
        # node_id, node_rank, old_node_rank, rank_start: survivors in their old order, then the standby
        assert second[0]["members"] == [["w0", 0, 0, 0], ["w2", 1, 2, 2], ["w3", 2, 3, 4], ["spare", 3, None, 6]]
        assert second[0]["excluded"] == [["w1", 1, "closed its connection"]]
        assert [(a["node_rank"], a["old_node_rank"]) for a in second] == [(0, 0), (1, 2), (2, 3), (3, None)]

        # Two survivors report another (alive, say hung): the rest recover, the reported one is excluded.
        # One report alone is a vote that is held (w3 still heartbeats): nobody recovers on it.
        workers[0].send("report w3 hung")
        assert workers[0].next("reported")["node_id"] == "w3"
        time.sleep(0.5)
        workers[2].send("report w3 hung")
        assert workers[2].next("reported")["node_id"] == "w3"
        third = [w.next("assignment") for w in (workers[0], workers[2], spare)]
        for a in third:
            assert "error" not in a, a
            assert _agreed(a) == _agreed(third[0])
        assert third[0]["generation"] == g2 + 1 and third[0]["previous_generation"] == g2
        assert third[0]["members"] == [["w0", 0, 0, 0], ["w2", 1, 1, 2], ["spare", 2, 3, 4]]
        assert third[0]["excluded"] == [["w3", 2, "reported failed by 'w2' and 'w0': hung"]]
        refused = workers[3].next("recover")
        assert refused["error"] == "Excluded" and refused["code"] == 15
        # Excluded whether it asks before the round closed or after (its heartbeat finds it stale).
        assert (f"excluded from generation {g2}" in refused["detail"]
                or f"generation {g2} was replaced by {g2 + 1}" in refused["detail"]), refused
    finally:
        for w in workers + ([spare] if spare else []):
            w.stop()


def _join_pair(url, **kw):
    """Two joined Nodes n0, n1 of one generation (joined from threads)."""
    nodes = [Node(url, node_id=f"n{i}", min_nodes=1, max_nodes=2, last_call=5, want_members=True, timeout=10,
                  **kw)
             for i in range(2)]
    threads = [threading.Thread(target=n.join, kwargs={"timeout": 10}) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert all(n.assignment is not None for n in nodes)
    return nodes


def test_bad_input_and_excluded_in_process(daemon):
    url = daemon.url("bad")
    n0, n1 = _join_pair(url)
    outsider = Node(url, node_id="x", timeout=5)
    try:
        with pytest.raises(muster.NotFound, match="'nobody' is not a member of generation"):
            n0.report("nobody")
        for bad in ("", None, 5):
            with pytest.raises(ValueError, match="node_id must be a non-empty str"):
                n0.report(bad)
        with pytest.raises(TypeError):
            n0.report("n1", cause=3)
        with pytest.raises(muster.Conflict, match="is running: nothing to recover"):
            n0.recover(timeout=5)
        with pytest.raises(muster.NotMember, match="never a member"):
            outsider.recover(timeout=5)
        with pytest.raises(muster.NotMember):
            outsider.report("n0")

        # A report is a vote: n0's alone is held, and n1 stays a member.
        n0.report("n1", cause="no progress for 60 s")
        n1.heartbeat()
        # n1's own word agrees: it is excluded.
        n1.report("n1", cause="no progress for 60 s")
        with pytest.raises(muster.Excluded) as e:
            n1.recover(timeout=5)
        assert e.value.code == 15 and not e.value.retryable
        assert "reported failed by 'n1': no progress for 60 s" in str(e.value)
        a = n0.recover(timeout=5)  # min_nodes is 1: n0 goes on alone
        assert a.recovered and a.previous_generation == a.generation - 1 and a.old_node_rank == 0
        assert a.num_nodes == 1 and a.members[0]["node_id"] == "n0" and a.members[0]["old_node_rank"] == 0
        assert a.excluded == [ExcludedMember("n1", 1, "reported failed by 'n1': no progress for 60 s")]
        n0.heartbeat()  # the Node heartbeats for the new generation
        with pytest.raises(muster.Excluded, match="replaced"):
            n1.recover(timeout=5)
    finally:
        for n in (n0, n1, outsider):
            n.close()


def test_armed_recovery_in_process(daemon):
    """n0 arms while the generation runs; n1's connection closes: n0 hears the loss and recover() takes the
    answer that came with it.  Arming without a membership is NotMember."""
    url = daemon.url("armed")
    n0, n1 = _join_pair(url)
    outsider = Node(url, node_id="x", timeout=5)
    try:
        g = n0.assignment.generation
        n0.arm(timeout=5)
        n0.arm(timeout=5)  # a no-op once armed
        with pytest.raises(muster.NotMember):
            outsider.arm()
        n1.close()
        ev = n0.next_event(timeout=10)
        assert ev is not None and ev.kind == muster.Event.MEMBER_LOST and ev.generation == g
        a = n0.recover(timeout=5)
        assert a.recovered and a.generation == g + 1 and a.previous_generation == g and a.num_nodes == 1
        assert a.excluded == [ExcludedMember("n1", 1, "closed its connection")]
    finally:
        for n in (n0, n1, outsider):
            n.close()
