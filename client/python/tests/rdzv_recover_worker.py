"""One rendezvous node for test_rdzv_recovery.py, in its own process.

    rdzv_recover_worker.py URL NODE_ID MAX_NODES [--standby]

Joins (as a standby with --standby) and prints each answer as one JSON line
on stdout; when its generation breaks (member_lost, or its heartbeat found
it stale) it calls recover() once per generation and prints the answer, or
the error's class and code.  Commands on stdin, one a line: "report ID
CAUSE" (prints the outcome) and "exit".  Bounded by 60 s.
"""

import json
import os
import queue
import sys
import threading
import time

import muster
from muster.rdzv import Node

LIFE_S = 60


def say(**kw):
    """One JSON line on stdout, written at once."""
    os.write(1, (json.dumps(kw) + "\n").encode())


def answer(a):
    """What every node of a round must agree on, plus this node's own place."""
    return dict(what="assignment", generation=a.generation, previous_generation=a.previous_generation,
                node_id=a.node_id, node_rank=a.node_rank, old_node_rank=a.old_node_rank,
                members=[[m["node_id"], m["node_rank"], m["old_node_rank"], m["rank_start"]] for m in a.members],
                excluded=[list(x) for x in a.excluded])


def failure(what, e):
    """An error as a JSON line: class name, code, detail."""
    say(what=what, error=type(e).__name__, code=e.code, detail=e.detail)


def commands(q):
    """Feed stdin's lines to q."""
    for line in sys.stdin:
        q.put(line.split(None, 2))
    q.put(["exit"])


def main():
    url, node_id, max_nodes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    standby = "--standby" in sys.argv[4:]
    cmds = queue.Queue()
    threading.Thread(target=commands, args=(cmds,), daemon=True).start()
    node = Node(url, node_id=node_id, local_world_size=2, min_nodes=2, max_nodes=max_nodes, last_call=10,
                want_members=True, timeout=30, standby=standby)
    say(what="joining")
    a = node.join(timeout=30)
    say(**answer(a))
    tried = set()  # generations whose recovery this node already asked for
    deadline = time.monotonic() + LIFE_S
    while time.monotonic() < deadline:
        try:
            cmd = cmds.get_nowait()
        except queue.Empty:
            cmd = None
        if cmd and cmd[0] == "exit":
            break
        if cmd and cmd[0] == "report":
            try:
                node.report(cmd[1], cmd[2].strip() if len(cmd) > 2 else None, timeout=10)
                say(what="reported", node_id=cmd[1])
            except muster.Error as e:
                failure("report", e)
        ev = node.next_event(timeout=0.02)
        lost = ev is not None and ev.kind == muster.Event.MEMBER_LOST and ev.generation == a.generation
        if (lost or node.stale) and a.generation not in tried:
            tried.add(a.generation)
            try:
                a = node.recover(timeout=30)
                say(**answer(a))
            except muster.Error as e:
                failure("recover", e)
    node.close()


if __name__ == "__main__":
    main()
