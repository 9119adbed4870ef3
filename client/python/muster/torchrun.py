"""muster.torchrun: a torchrun rendezvous backend on musterd's rendezvous rounds.

    torchrun --rdzv-backend muster --rdzv-endpoint host:29600 --rdzv-id job \\
             --nnodes 1:4 --nproc-per-node N train.py

torch >= 2.4 finds the backend through the ``torchrun.handlers`` entry point
(entry_point() below).  Older torch (1.13) has no entry points: importing
muster.torchrun registers it with torch's rendezvous handler registry, so
run ``python3 -c 'import muster.torchrun, sys; from torch.distributed.run
import main; sys.exit(main())' --rdzv_backend muster ...``.

--rdzv-conf keys: token (the namespace's token), tls=1, ca/cert/key (PEM
paths), join_timeout (s, default 600), last_call_timeout (s, default 30; a
round closes at max nodes at once, or at min nodes after this),
timeout (s, the store timeout, default 300).  The namespace is the run id.

Each agent's node joins a round with its own connection, heartbeated by a
thread (muster.rdzv.Node): a generation is a torch rendezvous round, node
rank and node count become the group rank and group world size.
num_nodes_waiting() counts the nodes waiting to join (scale-up) and, once a
member was lost, reports the loss too, so the agent restarts its workers and
re-forms without waiting for a collective to fail.  set_closed() writes
muster/torchrun/closed; is_closed() checks it.

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

import os
import socket
import urllib.parse

from torch.distributed import PrefixStore
from torch.distributed.elastic.rendezvous import (RendezvousClosedError, RendezvousConnectionError,
                                                  RendezvousHandler, RendezvousParameters,
                                                  RendezvousTimeoutError)

from . import _core, errors
from .client import Event
from .rdzv import Node
from .torch import MusterStore

try:  # torch >= 2.4
    from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo
except ImportError:
    RendezvousInfo = RendezvousStoreInfo = None

__all__ = ["MusterRendezvousHandler", "create_handler", "entry_point"]

# Reserved key names live in proto/keys.h; the extension hands them over.
CLOSED_KEY = _core.KEY_TORCHRUN_CLOSED


def _url(params):
    """The store URL of the run: endpoint, the run id as namespace, token/TLS from --rdzv-conf."""
    endpoint = params.endpoint or f"127.0.0.1:{29600}"
    query = [(k, str(params.get(k))) for k in ("token", "tls", "ca", "cert", "key") if params.get(k)]
    url = f"tcp://{endpoint}/{params.run_id}"
    return url + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else "")


class MusterRendezvousHandler(RendezvousHandler):
    """torchrun's RendezvousHandler over musterd's native rendezvous."""

    def __init__(self, url, run_id, min_nodes, max_nodes, join_timeout=600.0, last_call_timeout=30.0,
                 store_timeout=300.0, node_id=None, local_addr=None):
        self._url = url
        self._run_id = run_id
        self._min, self._max = min_nodes, max_nodes
        self._join_timeout = join_timeout
        self._local_addr = local_addr
        self._node_id = node_id or f"{local_addr or socket.getfqdn()}-{os.getpid()}"
        try:
            self._store = MusterStore(url, timeout=store_timeout)
            self._node = Node(url, node_id=self._node_id, min_nodes=min_nodes, max_nodes=max_nodes,
                              last_call=last_call_timeout if min_nodes < max_nodes else 0, timeout=store_timeout)
        except errors.ConnectionLost as e:
            raise RendezvousConnectionError(f"cannot reach musterd at {url}: {e}") from e
        self._waiting = set()
        self._lost = False

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
        try:
            a = self._node.join(timeout=self._join_timeout)
        except errors.Timeout as e:
            raise RendezvousTimeoutError(f"no round of {self._run_id} closed within {self._join_timeout} s") from e
        except errors.ConnectionLost as e:
            raise RendezvousConnectionError(str(e)) from e
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
        """Whether the run was closed (set_closed by any agent)."""
        return self._store.check([CLOSED_KEY])

    def set_closed(self):
        """Close the run: later next_rendezvous calls raise RendezvousClosedError."""
        self._store.set(CLOSED_KEY, b"1")

    def get_run_id(self):
        """The run id (the namespace)."""
        return self._run_id

    def shutdown(self):
        """Leave the rendezvous and close both connections."""
        try:
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
        store_timeout=float(params.get("timeout", 300)),
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
