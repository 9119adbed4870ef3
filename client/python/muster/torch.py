"""muster.torch: musterd as a torch.distributed.Store, and the muster://
init_method.

    store = muster.torch.MusterStore("tcp://host:29600/job?token=T", timeout=timedelta(minutes=5))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)

    import muster.torch   # registers muster://
    dist.init_process_group("nccl", init_method="muster://host:29600/job?token=T")

MusterStore follows torch's Store semantics: get blocks until the key
exists, up to the store timeout; wait raises on timeout; add returns the new
int; compare_set returns the value now held.  The timeouts are enforced by
musterd, so a timed-out get or wait leaves the connection usable.  Timeouts
raise StoreTimeout, which is both a muster.Timeout and the RuntimeError (or,
on torch 2.x, the DistStoreError) torch's own stores raise.

Threads: torch may call a store from several threads (gloo, NCCL's
watchdog); the calls take turns on the one connection, as on a TCPStore
client.  What a PrefixStore forwards to a Python store depends on the torch
version: 1.13 forwards set, get, add, compare_set, wait and check, but not
num_keys or delete_key; 2.x forwards those and, through has_extended_api,
multi_get, multi_set and append.
"""

import datetime
import os
import urllib.parse

import torch.distributed as dist

from .client import _MAX_MS, I64_MAX, I64_MIN, U32_MAX, Client, check_int, seconds_of, to_bytes, unbounded
from .errors import Timeout

__all__ = ["MusterStore", "StoreTimeout", "DEFAULT_TIMEOUT", "NO_DEADLINE", "url_from_init_method"]

#: The store timeout that means no deadline (what inf and timedelta.max become).
NO_DEADLINE = datetime.timedelta(milliseconds=_MAX_MS)

#: torch's default store timeout (torch.distributed.constants.default_pg_timeout).
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


class StoreTimeout(Timeout, getattr(dist, "DistStoreError", RuntimeError)):
    """A store operation ran past its timeout (muster.Timeout and torch's store error)."""


def _as_timedelta(timeout):
    """timedelta from a timedelta or seconds; no deadline (inf, timedelta.max)
    is the longest libmuster carries, which torch's own timeout can hold too."""
    if unbounded(timeout):
        return NO_DEADLINE
    if isinstance(timeout, datetime.timedelta):
        seconds_of(timeout)  # ValueError when negative
        return timeout
    return datetime.timedelta(seconds=seconds_of(timeout))


class MusterStore(dist.Store):
    """A torch.distributed.Store kept by musterd, in the namespace the URL names.

    url: a muster store URL (tcp://, tls://, several HA endpoints, env://;
    None = $MUSTER_URL).  timeout: the store timeout (timedelta or seconds)
    for get and wait, and the connect deadline unless connect_timeout says
    otherwise."""

    def __init__(self, url=None, timeout=DEFAULT_TIMEOUT, connect_timeout=None, name="muster.torch"):
        super().__init__()
        timeout = _as_timedelta(timeout)
        self.url = url
        self._client = Client(url, timeout=timeout,
                              connect_timeout=connect_timeout if connect_timeout is not None else timeout,
                              name=name)
        self.set_timeout(timeout)

    def _call(self, fn, *args, **kw):
        """Run a client call, turning a deadline into StoreTimeout."""
        try:
            return fn(*args, **kw)
        except Timeout as e:
            raise StoreTimeout(e.message, e.code, e.retryable, e.detail) from None

    # -- torch.distributed.Store

    def set(self, key, value):
        """Set key to value (bytes, str, or torch's list of byte values)."""
        self._call(self._client.set, key, to_bytes(value))

    def get(self, key):
        """The value of key; blocks until it exists, up to the store timeout."""
        return self._call(self._client.get, key, wait=True, timeout=self._timeout)

    def add(self, key, amount):
        """Add amount to the integer at key (absent = 0); returns the new value."""
        return self._call(self._client.add, key, check_int("amount", amount, I64_MIN, I64_MAX))

    def compare_set(self, key, expected_value, desired_value):
        """Write desired_value when key holds expected_value (or is absent and
        expected_value is empty); returns the value key now holds."""
        _, value = self._call(self._client.compare_set, key, to_bytes(expected_value), to_bytes(desired_value))
        return value

    def wait(self, keys, timeout=None):
        """Block until every key exists; StoreTimeout after timeout (default: the store timeout)."""
        self._call(self._client.wait, list(keys), timeout=_as_timedelta(timeout) if timeout is not None
                   else self._timeout)

    def check(self, keys):
        """Whether every key exists, at once."""
        return self._call(self._client.check, list(keys))

    def delete_key(self, key):
        """Delete key; returns whether it existed."""
        return self._call(self._client.delete, key)

    def num_keys(self):
        """Number of keys in the namespace."""
        return self._call(self._client.num_keys)

    def set_timeout(self, timeout):
        """Set the store timeout used by get and wait."""
        self._timeout = _as_timedelta(timeout)
        super().set_timeout(self._timeout)

    def multi_get(self, keys):
        """The values of keys, blocking until all exist (up to the store timeout)."""
        return self._call(self._client.multi_get, list(keys), wait=True, timeout=self._timeout)

    def multi_set(self, keys, values):
        """Set several keys atomically."""
        self._call(self._client.multi_set, list(keys), [to_bytes(v) for v in values])

    def append(self, key, value):
        """Append value to key (created when absent)."""
        self._call(self._client.append, key, to_bytes(value))

    def queue_push(self, key, value):
        """Append value to key's queue (torch 2.5's Store API)."""
        self._call(self._client.queue_push, key, to_bytes(value))

    def queue_pop(self, key, block=True):
        """The oldest value of key's queue; with block, waiting for one up to the store timeout.  An empty
        queue raises, as torch's stores do."""
        value = self._call(self._client.queue_pop, key, block=block, timeout=self._timeout)
        if value is None:
            raise getattr(dist, "DistQueueEmptyError", RuntimeError)(f"queue '{key}' is empty")
        return value

    def queue_len(self, key):
        """The length of key's queue."""
        return self._call(self._client.queue_len, key)

    def has_extended_api(self):
        """multi_get, multi_set and append are native (torch 2.x asks)."""
        return True

    def clone(self):
        """A store on its own connection to the same namespace (torch 2.x's ProcessGroupNCCL clones its
        store for its own threads; the base Store answers "Not implemented")."""
        return MusterStore(self.url, timeout=self._timeout, name="muster.torch clone")

    # -- muster extras

    @property
    def client(self):
        """The muster.Client underneath, for watches, barriers, keys()."""
        return self._client

    def close(self):
        """Close the connection."""
        self._client.close()

    def __repr__(self):
        return f"<muster.torch.MusterStore {self.url or '$MUSTER_URL'} timeout={self._timeout}>"


def url_from_init_method(url):
    """(store URL, rank, world_size, timeout) from muster://HOST[:PORT][,...][/JOB][?query].

    rank and world_size come from the query (torch appends them from
    init_process_group's arguments), else from $RANK and $WORLD_SIZE, else
    None.  The other query parameters are libmuster's (token, timeout in
    milliseconds, tls, ca, cert, key, name, failover) and pass through;
    timeout is also returned, as a timedelta, or None.  muster+tls:// means
    TLS.  ValueError when rank, world_size or timeout is not an integer in
    range."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("muster", "muster+tls"):
        raise ValueError(f"not a muster:// URL: {url!r}")
    base, _, query = rest.partition("?")
    kept, rank, world_size, timeout = [], None, None, None
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k == "rank":
            rank = _int_text("rank", v, 0, U32_MAX - 1)
        elif k == "world_size":
            world_size = _int_text("world_size", v, 1, U32_MAX)
        else:
            if k == "timeout":
                timeout = datetime.timedelta(milliseconds=_int_text("timeout", v, 1, _MAX_MS))
            kept.append((k, v))
    if rank is None and os.environ.get("RANK"):
        rank = _int_text("RANK", os.environ["RANK"], 0, U32_MAX - 1)
    if world_size is None and os.environ.get("WORLD_SIZE"):
        world_size = _int_text("WORLD_SIZE", os.environ["WORLD_SIZE"], 1, U32_MAX)
    if rank is not None and world_size is not None and rank >= world_size:
        raise ValueError(f"rank {rank} is not below world_size {world_size}")
    store_url = ("tls://" if scheme == "muster+tls" else "tcp://") + base
    if kept:
        store_url += "?" + urllib.parse.urlencode(kept, quote_via=urllib.parse.quote)
    return store_url, rank, world_size, timeout


def _int_text(name, text, lo, hi):
    """The decimal integer text names, in [lo, hi]; ValueError otherwise."""
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a decimal integer, not {text!r}") from None
    return check_int(name, n, lo, hi)


def _muster_rendezvous_handler(url, timeout=DEFAULT_TIMEOUT, **kwargs):
    """torch's init_method handler for muster://: yields (store, rank, world_size) once."""
    store_url, rank, world_size, url_timeout = url_from_init_method(url)
    if rank is None or world_size is None:
        raise ValueError("muster:// needs rank and world_size: pass them to init_process_group "
                         "or set RANK and WORLD_SIZE")
    store = MusterStore(store_url, timeout=url_timeout or timeout)
    yield (store, rank, world_size)
    raise RuntimeError("muster:// does not re-rendezvous; use the torchrun backend (muster.torchrun)")


def _register():
    """Register muster:// and muster+tls:// with torch (once per process)."""
    from torch.distributed import rendezvous as rdzv
    for scheme in ("muster", "muster+tls"):
        if scheme not in getattr(rdzv, "_rendezvous_handlers", {}):
            dist.register_rendezvous_handler(scheme, _muster_rendezvous_handler)


_register()


# Recovery in place (muster run --recovery in-place): the survivors' side of a world change.
from .inplace import (  # noqa: E402 (after MusterStore, which inplace builds its groups on)
    EXIT_STUCK, GUARD_ENV, WorldChanged, generation, init_process_group, iteration, on_change, recover, register,
    shutdown, step)

__all__ += ["EXIT_STUCK", "GUARD_ENV", "WorldChanged", "generation", "init_process_group", "iteration", "on_change",
            "recover", "register", "shutdown", "step"]
