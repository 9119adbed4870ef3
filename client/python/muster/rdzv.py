"""muster.rdzv: a node's membership in musterd's native rendezvous.

    node = muster.rdzv.Node("tcp://host:29600/job", min_nodes=2, max_nodes=4, last_call=5)
    a = node.join(timeout=600)          # Assignment: generation, node_rank, num_nodes, ...
    ev = node.next_event(timeout=1)     # member_lost / node_waiting / shutdown, or None
    node.leave(); node.close()

A round closes when max_nodes joined, or min_nodes joined and last_call
seconds passed; every member gets its assignment at the same moment.
Membership lasts while the Node's connection is open and heartbeats arrive:
after join() a background thread sends them at the server's interval and
collects membership events.  The Node owns its own connection (one
membership per connection), so key-value traffic belongs on a separate
muster.Client.  A join by a member of the running generation ends it and
enters the next round, which is how members re-form after a loss.

Recovery without restarting: when the generation breaks (a member_lost
event, or node.stale), the survivors call recover() instead of join(); the
server answers every one of them with the same next generation, keeping
their order from the broken one (Assignment.old_node_rank, and each
member's "old_node_rank"), then newcomers, then standbys, and lists the
members left out (Assignment.excluded, with causes).  A node left out gets
muster.Excluded and may only join() again as a newcomer.  report(node_id)
tells the server a peer failed before it saw so itself; a Node made with
standby=True waits in join() as a spare until a round has room for it.
"""

import collections
import queue
import threading
import time

from .client import U32_MAX, Client, Event, check_int, to_ms, unbounded
from .errors import ConnectionLost, NotMember, Stale

__all__ = ["Node", "Assignment", "ExcludedMember"]

#: A member of the previous generation that a recovery round left out: its
#: node id, its rank in that generation and why ("closed its connection",
#: "missed its heartbeats", "reported failed by ...", ...).
ExcludedMember = collections.namedtuple("ExcludedMember", ["node_id", "old_node_rank", "cause"])


def _old_rank(rank):
    """An old rank from libmuster, None for "none" (UINT32_MAX: a newcomer, or not a recovery)."""
    return None if rank == U32_MAX else rank


class Assignment:
    """What a round decided for this node (members only when asked for).
    After a recovery, previous_generation is the generation it replaces,
    old_node_rank this node's rank there (None for a newcomer or standby)
    and excluded the members left out; otherwise 0, None and []."""

    __slots__ = ("generation", "node_id", "node_rank", "num_nodes", "rank_start", "local_world_size",
                 "world_size", "members", "previous_generation", "old_node_rank", "excluded")

    def __init__(self, d):
        for k in self.__slots__:
            setattr(self, k, d[k])
        self.old_node_rank = _old_rank(self.old_node_rank)
        for m in self.members:
            m["old_node_rank"] = _old_rank(m["old_node_rank"])
        self.excluded = [ExcludedMember(x[0], _old_rank(x[1]), x[2]) for x in self.excluded]

    @property
    def recovered(self):
        """Whether this assignment came from a recovery round."""
        return self.previous_generation != 0

    def __repr__(self):
        extra = (f", previous_generation={self.previous_generation}, old_node_rank={self.old_node_rank}, "
                 f"excluded={self.excluded!r}") if self.recovered else ""
        return ("Assignment(generation={0.generation}, node_id={0.node_id!r}, node_rank={0.node_rank}, "
                "num_nodes={0.num_nodes}, rank_start={0.rank_start}, world_size={0.world_size}{1})".format(self, extra))


class Node:
    """One node of a job's rendezvous, on its own connection to musterd."""

    _POLL_S = 0.1  # longest the heartbeat thread holds the connection waiting for events

    def __init__(self, url=None, node_id=None, local_world_size=1, min_nodes=1, max_nodes=None, last_call=0,
                 want_members=False, timeout=None, connect_timeout=None, standby=False):
        self.node_id = node_id
        self.local_world_size = check_int("local_world_size", local_world_size, 1, U32_MAX)
        self.min_nodes = check_int("min_nodes", min_nodes, 1, U32_MAX)
        self.max_nodes = check_int("max_nodes", max_nodes if max_nodes is not None else min_nodes, self.min_nodes,
                                   U32_MAX)
        if unbounded(last_call):
            raise ValueError("last_call must be finite (a round closes at max_nodes, or at min_nodes after it)")
        self.last_call = last_call
        self.want_members = want_members
        self.standby = bool(standby)
        self.client = Client(url, timeout=timeout, connect_timeout=connect_timeout, name="muster.rdzv")
        self.assignment = None
        self.stale = False
        self._events = queue.Queue()
        self._stop = threading.Event()
        self._thread = None

    def join(self, timeout=None):
        """Join the job's next round and wait for its assignment (Timeout,
        Conflict when the round's min/max differ or the node id is taken);
        with no deadline, join again each time the server's deadline passes.
        A standby Node waits here until a round admits it."""
        self._stop_heartbeats()
        last_call = to_ms(self.last_call) if self.last_call else 0
        a = self.client._until(lambda ms: self.client._conn.rdzv_join(
            self.node_id, self.local_world_size, self.min_nodes, self.max_nodes, last_call, self.want_members, ms,
            self.standby), timeout)
        return self._start(a)

    def recover(self, timeout=None):
        """Join the recovery round of this node's broken generation and wait
        for the next generation, which every survivor receives the same
        (Assignment with previous_generation, old_node_rank, excluded).
        Excluded: this node was left out (join() again as a newcomer);
        Conflict: the generation still runs (report() the failed peer
        first); Timeout: too few nodes to go on in place; NotMember: this
        Node never joined."""
        self._stop_heartbeats()
        try:
            a = self.client._until(lambda ms: self.client._conn.rdzv_recover(
                self.local_world_size, self.want_members, ms), timeout)
        except Exception:
            self.stale = True  # the old generation stays broken: heartbeats stay off
            raise
        return self._start(a)

    def arm(self, timeout=None):
        """Arm this node's recovery while its generation runs: the recovery
        join goes now and waits at the server for a break, where it counts
        as this node's join of the recovery round (timeout counts from the
        break).  recover() after member_lost then takes the answer that
        came with the event.  A no-op once armed for this generation;
        join() and leave() drop it.  NotMember: no generation to arm."""
        self.client._conn.rdzv_arm(self.local_world_size, self.want_members, to_ms(timeout))

    def report(self, node_id, cause=None, timeout=None):
        """Tell the server that member node_id of this node's generation
        failed (cause: free text, at most 128 bytes kept).  A vote: the
        generation breaks and node_id is excluded from the recovery once a
        second member reports it, or it reports itself, or its heartbeats
        have been silent for half the heartbeat timeout; until then nothing
        changes.  NotFound when
        node_id is not a member, NotMember when this Node is not a live
        member of the latest generation."""
        if not isinstance(node_id, str) or not node_id:
            raise ValueError(f"node_id must be a non-empty str, not {node_id!r}")
        if cause is not None and not isinstance(cause, str):
            raise TypeError(f"cause must be a str or None, not {type(cause).__name__}")
        self.client._conn.rdzv_report(node_id, cause, to_ms(timeout))

    def heartbeat(self, timeout=None):
        """Send one heartbeat now (the thread does this by itself); Stale when
        the generation broke."""
        self.client._conn.rdzv_heartbeat(self.assignment.generation, to_ms(timeout))

    def next_event(self, timeout=None):
        """The next membership event (Event: member_lost, node_waiting,
        shutdown), or None when none came within timeout (None: wait)."""
        try:
            return self._events.get(timeout=timeout) if timeout is None or timeout > 0 else \
                self._events.get_nowait()
        except queue.Empty:
            return None

    def leave(self, timeout=None):
        """Leave the job: the running generation breaks for the others."""
        self._stop_heartbeats()
        try:
            self.client._conn.rdzv_leave(to_ms(timeout))
        except NotMember:
            pass
        self.assignment = None

    def close(self):
        """Stop heartbeating and close the connection (membership ends with it)."""
        self._stop_heartbeats()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self, raw):
        """Take a round's answer as this Node's assignment and start heartbeating for it."""
        self.assignment = Assignment(raw)
        self.stale = False
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="muster-rdzv-heartbeat", daemon=True)
        self._thread.start()
        return self.assignment

    def _stop_heartbeats(self):
        """Stop the heartbeat thread, if any, and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self):
        """Heartbeat at the server's interval; queue membership events meanwhile."""
        conn = self.client._conn
        interval = max(conn.heartbeat_interval(), 50) / 1000.0
        gen = self.assignment.generation
        next_beat = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_beat and not self.stale:
                try:
                    conn.rdzv_heartbeat(gen, 0)
                except Stale:
                    self.stale = True
                except (ConnectionLost, NotMember):
                    self.stale = True
                next_beat = now + interval
            try:
                raw = conn.next_event(to_ms(min(self._POLL_S, interval)))
            except ConnectionLost:
                self.stale = True
                self._events.put(Event((3, 0, None, None, 0, self.assignment.node_id, "connection lost")))
                return
            if raw is not None:
                ev = Event(raw)
                if ev.kind == Event.MEMBER_LOST and ev.generation == gen:
                    self.stale = True
                self._events.put(ev)
