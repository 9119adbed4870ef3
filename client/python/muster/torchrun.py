"""muster.torchrun: a torchrun rendezvous backend on musterd's rendezvous rounds.

    torchrun --rdzv-backend muster --rdzv-endpoint host:29600 --rdzv-id job \\
             --nnodes 1:4 --nproc-per-node N train.py

    python3 -m muster.torchrun --rdzv_backend muster --rdzv_endpoint host:29600 \\
             --rdzv_id job --nnodes 2 --nproc_per_node N train.py

torch >= 2.4 finds the backend through the ``torchrun.handlers`` entry point
(entry_point() below).  Older torch (1.13) has no entry points: importing
muster.torchrun registers it with torch's rendezvous handler registry, and
``python3 -m muster.torchrun ARGS`` does that, then runs torch's launcher
(torch.distributed.run's main) with ARGS, on any torch.  It also mends
torch 1.13's --redirects/--tee parsing under Python 3.11, which finds no
value for the default 0 (nor 3), so the launcher crashes starting workers.

--rdzv-conf keys: token (the namespace's token), tls=1, ca/cert/key (PEM
paths), join_timeout (s, default 600), last_call_timeout (s, default 30; a
round closes at max nodes at once, or at min nodes after this),
timeout (s, the agents' store timeout: torchrun passes 900 unless
--rdzv-conf sets it).  The namespace is the run id.

Each agent's node joins a round with its own connection, heartbeated by a
thread (muster.rdzv.Node): a generation is a torch rendezvous round, node
rank and node count become the group rank and group world size.
num_nodes_waiting() counts the nodes waiting to join (scale-up) and, once a
member was lost, reports the loss too, so the agent restarts its workers and
re-forms without waiting for a collective to fail.

Closing: shutdown(), which torch's launcher calls when its agent ends (not
when a signal ends it), closes the run as torch's own c10d backend does:
set_closed() writes muster/torchrun/closed with the latest generation, and
is_closed() is true for agents of that generation or an earlier one (a new
launch with the same run id starts afresh).  So that the other agents end
within seconds once the job cannot go on, instead of at the store timeout
(900 s) or the join timeout: a join waiting for nodes looks every
JOIN_SLICE_S (or last_call_timeout + JOIN_SLICE_S) whether the run was
closed, and raises RendezvousClosedError; and a get or wait on the agents'
store (torch's exit barrier) looks every SLICE_S whether the run was closed
or its generation is over (a member left, was lost or joined the next
round: the key it would write never comes), and then gives up within
GRACE_S with RendezvousClosedError.  The short waits also let SIGTERM
through to the agent.

The agents' store is a PrefixStore ``torch.rendezvous.<run_id>.<generation>``
over a MusterStore of the run's namespace.  Workers do not use it:
use_agent_store is False (TORCHELASTIC_USE_AGENT_STORE=False), so torch
gives them MASTER_ADDR/MASTER_PORT (rank 0's host and a free port) and
global rank 0 hosts their TCPStore (env://), as with torch's own backends.
Workers that want musterd instead find MUSTER_URL in their environment (the
run's namespace), so ``MusterStore()`` or ``muster.connect()`` reach it with
tokens, deadlines and failover; keys there outlive a generation, so scope
them by TORCHELASTIC_RESTART_COUNT or MUSTER_GENERATION (also set).
"""

import math
import os
import socket
import sys
import time
import urllib.parse

from torch.distributed import PrefixStore
from torch.distributed.elastic.rendezvous import (RendezvousClosedError, RendezvousConnectionError,
                                                  RendezvousHandler, RendezvousParameters,
                                                  RendezvousTimeoutError)

from . import _core, errors
from .client import Event, seconds_of
from .rdzv import Node
from .torch import MusterStore, _as_timedelta

try:  # torch >= 2.4
    from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo
except ImportError:
    RendezvousInfo = RendezvousStoreInfo = None

__all__ = ["MusterRendezvousHandler", "create_handler", "entry_point", "main"]

# Reserved key names live in proto/keys.h; the extension hands them over.
CLOSED_KEY = _core.KEY_TORCHRUN_CLOSED

SLICE_S = 1.0       # longest single wait of the agents' store between looks at the run
GRACE_S = 3.0       # how long a get or wait goes on once the run is closed or its generation over
JOIN_SLICE_S = 2.0  # longest single join wait (plus the last call) between looks at the run


def _url(params):
    """The store URL of the run: endpoint, the run id as namespace, token/TLS from --rdzv-conf."""
    endpoint = params.endpoint or f"127.0.0.1:{29600}"
    query = [(k, str(params.get(k))) for k in ("token", "tls", "ca", "cert", "key") if params.get(k)]
    url = f"tcp://{endpoint}/{params.run_id}"
    return url + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else "")


class _AgentStore(MusterStore):
    """The agents' store: get and wait in short waits that give up once the run cannot go on."""

    def __init__(self, url, timeout, over):
        super().__init__(url, timeout=timeout, name="muster.torchrun")
        self._over = over  # callable: whether the run was closed or the generation is over

    def _sliced(self, call, timeout):
        """call(seconds) in waits of SLICE_S until it returns or timeout passes;
        RendezvousClosedError GRACE_S after the run was seen unable to go on."""
        seconds = seconds_of(timeout)
        deadline = time.monotonic() + seconds if math.isfinite(seconds) else math.inf
        give_up = math.inf
        while True:
            left = min(deadline, give_up) - time.monotonic()
            try:
                return call(max(min(SLICE_S, left), 0.001))
            except errors.Timeout:
                now = time.monotonic()
                if now >= deadline:
                    raise
                if now >= give_up:
                    raise RendezvousClosedError("the run was closed or its generation is over: "
                                                "the agents this waits for will not come") from None
                if give_up == math.inf and self._over():
                    give_up = now + GRACE_S

    def get(self, key):
        """The value of key, waiting for it (see _sliced)."""
        return self._call(self._sliced, lambda t: self._client.get(key, wait=True, timeout=t), self._timeout)

    def wait(self, keys, timeout=None):
        """Wait until every key exists (see _sliced)."""
        keys = list(keys)
        self._call(self._sliced, lambda t: self._client.wait(keys, timeout=t),
                   _as_timedelta(timeout) if timeout is not None else self._timeout)

    def multi_get(self, keys):
        """The values of keys, waiting for all (see _sliced; newer torch's barrier uses it)."""
        keys = list(keys)
        return self._call(self._sliced, lambda t: self._client.multi_get(keys, wait=True, timeout=t), self._timeout)


class MusterRendezvousHandler(RendezvousHandler):
    """torchrun's RendezvousHandler over musterd's native rendezvous."""

    def __init__(self, url, run_id, min_nodes, max_nodes, join_timeout=600.0, last_call_timeout=30.0,
                 store_timeout=900.0, node_id=None, local_addr=None):
        self._url = url
        self._run_id = run_id
        self._min, self._max = min_nodes, max_nodes
        self._join_timeout = join_timeout
        self._local_addr = local_addr
        self._node_id = node_id or f"{local_addr or socket.getfqdn()}-{os.getpid()}"
        self._last_call = last_call_timeout if min_nodes < max_nodes else 0
        try:
            self._store = _AgentStore(url, store_timeout, self._cannot_go_on)
            self._node = Node(url, node_id=self._node_id, min_nodes=min_nodes, max_nodes=max_nodes,
                              last_call=self._last_call, timeout=store_timeout)
        except errors.ConnectionLost as e:
            raise RendezvousConnectionError(f"cannot reach musterd at {url}: {e}") from e
        self._waiting = set()
        self._lost = False
        self._first_gen = None  # the first generation this agent was a member of

    def get_backend(self):
        """The backend name torchrun was given."""
        return "muster"

    @property
    def use_agent_store(self):
        """Workers do not use the agents' store (see the module's notes)."""
        return False

    def next_rendezvous(self):
        """Join the next round: (store, group rank, group world size), or
        RendezvousInfo on torch >= 2.4."""
        if self.is_closed():
            raise RendezvousClosedError()
        a = self._join()
        if self._first_gen is None:
            self._first_gen = a.generation
        self._waiting.clear()
        self._lost = False
        os.environ["MUSTER_URL"] = self._url
        os.environ["MUSTER_GENERATION"] = str(a.generation)
        store = PrefixStore(f"{_core.KEY_TORCHRUN_STORE_PREFIX}{self._run_id}.{a.generation}", self._store)
        if RendezvousInfo is None:
            return store, a.node_rank, a.num_nodes
        try:
            bootstrap = RendezvousStoreInfo.build(a.node_rank, store, local_addr=self._local_addr)
        except TypeError:  # torch 2.4's build(rank, store)
            bootstrap = RendezvousStoreInfo.build(a.node_rank, store)
        return RendezvousInfo(store, a.node_rank, a.num_nodes, bootstrap)

    def _join(self):
        """Join the next round in slices, looking between them whether the run was closed."""
        deadline = time.monotonic() + self._join_timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return self._node.join(timeout=max(min(left, self._last_call + JOIN_SLICE_S), 0.001))
            except errors.Timeout as e:
                if time.monotonic() >= deadline:
                    raise RendezvousTimeoutError(
                        f"no round of {self._run_id} closed within {self._join_timeout} s") from e
            except errors.ConnectionLost as e:
                raise RendezvousConnectionError(str(e)) from e
            if self.is_closed():
                raise RendezvousClosedError()

    def _cannot_go_on(self):
        """Whether the run was closed or this agent's generation is over."""
        a = self._node.assignment
        return self.is_closed() or (a is not None and self._store.client.check(
            [_core.key_rdzv_broken(a.generation)]))

    def _drain_events(self):
        """Take the membership events that arrived since the last look."""
        gen = self._node.assignment.generation if self._node.assignment else None
        while True:
            ev = self._node.next_event(timeout=0)
            if ev is None:
                return
            if ev.kind == Event.NODE_WAITING and ev.generation == gen:
                self._waiting.add(ev.node_id)
            elif ev.kind in (Event.MEMBER_LOST, Event.SHUTDOWN):
                self._lost = True

    def num_nodes_waiting(self):
        """Nodes waiting to join (the agent restarts to let them in); at least 1
        once this generation lost a member, so the agent re-forms."""
        self._drain_events()
        return max(len(self._waiting), 1 if self._lost or self._node.stale else 0)

    def is_closed(self):
        """Whether the run was closed (set_closed by any agent) in or after this
        agent's first generation; an agent not yet in one sees a new run."""
        closed = self._store.client.get(CLOSED_KEY, default=None)
        return closed is not None and self._first_gen is not None and self._first_gen <= int(closed)

    def set_closed(self):
        """Close the run: the agents of its generations so far see is_closed(),
        their next_rendezvous raises RendezvousClosedError."""
        latest = int(self._store.client.get(_core.KEY_RDZV_GENERATION, default=b"0"))
        mine = self._node.assignment.generation if self._node.assignment else 0
        self._store.set(CLOSED_KEY, str(max(latest, mine, self._first_gen or 0)))

    def get_run_id(self):
        """The run id (the namespace)."""
        return self._run_id

    def shutdown(self):
        """Close the run (as torch's c10d backend does: the launcher calls this
        when its agent ended, not for a signal), leave the rendezvous and close
        both connections."""
        try:
            self.set_closed()
            self._node.leave(timeout=5)
        except errors.Error:
            pass
        self._node.close()
        self._store.close()
        return True


def create_handler(params: RendezvousParameters) -> MusterRendezvousHandler:
    """torch's handler creator: --rdzv-endpoint, --rdzv-id, --nnodes and --rdzv-conf."""
    return MusterRendezvousHandler(
        _url(params), params.run_id, params.min_nodes, params.max_nodes,
        join_timeout=float(params.get("join_timeout", 600)),
        last_call_timeout=float(params.get("last_call_timeout", 30)),
        store_timeout=float(params.get("timeout", 900)),
        local_addr=getattr(params, "local_addr", None))


def entry_point():
    """The torchrun.handlers entry point (torch >= 2.4): returns the creator."""
    return create_handler


def _register():
    """Register "muster" with torch's handler registry (torch without entry points)."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry as registry
    try:
        registry.register("muster", create_handler)
    except ValueError:
        pass  # already registered (by the entry point, or an earlier import)


_register()


def _mend_std_parsing():
    """Make torch's Std.from_str answer 0 and 3 where it answers None (torch
    1.13 under Python 3.11, whose Flag iteration skips 0 and aliases)."""
    from torch.distributed.elastic.multiprocessing.api import Std
    if Std.from_str("0") is not None:
        return
    parse = Std.from_str.__func__

    def from_str(cls, vm):
        """Std (or {local rank: Std}) from "N" or "I:N,..."; the format checked by torch's own."""
        got = parse(cls, vm)
        if isinstance(got, dict):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        return cls(int(vm))
    Std.from_str = classmethod(from_str)


def main(argv=None):
    """python3 -m muster.torchrun ARGS: torch's launcher (torchrun) with the muster backend registered."""
    from torch.distributed.run import main as torchrun_main
    _mend_std_parsing()
    torchrun_main(sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
