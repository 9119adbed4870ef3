"""muster.Client: the key-value store, barriers and watches of one musterd
namespace, over one libmuster connection.

Threads: a Client is one connection, as in C, and threads may share it.
Calls from several threads are in flight together: a thread blocked in a
get, wait or barrier does not hold up another thread's set.  Every call
that talks to the server releases the GIL.  close() waits for the calls
other threads have in progress.

Timeouts are seconds (int or float) or datetime.timedelta; None means the
client's default (the ``timeout`` given to connect(), else the URL's
``?timeout=``, else 30 s).  float('inf') and timedelta.max (anything from
2**32 - 1 ms, about 49.7 days, up) mean no deadline: a blocking call then
waits again each time the server's --max-wait-timeout passes.  Blocking
calls pass the deadline to the server, which answers Timeout and leaves the
connection usable.  A negative or NaN timeout, and an integer argument out
of the range the protocol carries, raise ValueError.
"""

import datetime
import math
import operator

from . import _core
from .errors import NotFound, Timeout

#: The longest deadline libmuster carries (2**32 - 1 ms, about 49.7 days).
_MAX_MS = 2**32 - 1
U32_MAX = 2**32 - 1
I64_MIN, I64_MAX = -2**63, 2**63 - 1


def seconds_of(timeout):
    """Seconds (a float, maybe inf) from seconds or a timedelta; ValueError when negative or NaN."""
    try:
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    except (TypeError, ValueError):
        raise TypeError(f"timeout must be seconds or a timedelta, not {timeout!r}") from None
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, not {timeout!r}")
    return seconds


def unbounded(timeout):
    """Whether timeout means no deadline: float('inf'), timedelta.max, or
    anything at least as long as the longest deadline libmuster carries."""
    return timeout is not None and seconds_of(timeout) * 1000 >= _MAX_MS


def to_ms(timeout):
    """Milliseconds for libmuster from seconds or a timedelta (None -> 0, the
    default; no deadline -> the longest)."""
    if timeout is None:
        return 0
    ms = seconds_of(timeout) * 1000
    return _MAX_MS if ms >= _MAX_MS else max(1, math.ceil(ms))


def check_int(name, value, lo, hi):
    """value as an int in [lo, hi]: TypeError when not an integer, ValueError when out of range."""
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not lo <= n <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, not {n}")
    return n


def to_bytes(value):
    """Values are bytes; str is encoded as UTF-8, other buffers are copied."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(value)  # torch passes std::vector<uint8_t> as a list of ints
    raise TypeError(f"values are bytes or str, not {type(value).__name__}")


class Event:
    """A pushed event: a watched key set or deleted, a membership change, or
    the server draining.  kind is one of the Event.* names below."""

    SET, DELETE, MEMBER_LOST, NODE_WAITING, SHUTDOWN, WATCH_ENDED = (
        "set", "delete", "member_lost", "node_waiting", "shutdown", "watch_ended")
    _KINDS = {1: SET, 2: DELETE, 3: MEMBER_LOST, 4: NODE_WAITING, 5: SHUTDOWN, 6: WATCH_ENDED}
    __slots__ = ("kind", "watch_id", "key", "value", "generation", "node_id", "reason")

    def __init__(self, raw):
        kind, self.watch_id, self.key, self.value, self.generation, self.node_id, self.reason = raw
        self.kind = self._KINDS.get(kind, str(kind))

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__
                           if getattr(self, n) not in (None, 0) or n == "kind")
        return f"Event({fields})"


class Watch:
    """Events for one watched prefix; iterate to receive them (blocking), or
    call next(timeout).  Events of other watches or of the rendezvous that
    arrive meanwhile stay queued for Client.next_event()."""

    def __init__(self, client, prefix, watch_id):
        self.client = client
        self.prefix = prefix
        self.id = watch_id

    def next(self, timeout=None):
        """The next event of this watch, or None when none came within timeout
        (None waits until one comes)."""
        return self.client._next_for(self.id, timeout)

    def __iter__(self):
        return self

    def __next__(self):
        ev = self.next(None)
        if ev.kind == Event.WATCH_ENDED:
            raise StopIteration
        return ev

    def close(self, timeout=None):
        """Stop the watch."""
        if self.id is not None:
            self.client._conn.unwatch(self.id, to_ms(timeout))
            self.id = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """One connection to one musterd namespace; see muster.connect()."""

    _POLL_S = 1.0  # longest single wait of an unbounded event wait (lets signals through)

    def __init__(self, url=None, timeout=None, connect_timeout=None, name=None):
        self.url = url
        self._conn = _core.Conn(url, to_ms(connect_timeout if connect_timeout is not None else timeout),
                                to_ms(timeout), name)
        self._forever = unbounded(timeout)
        self._pending = []

    def _until(self, call, timeout):
        """call(ms), and again after each server deadline while timeout means no deadline."""
        ms = to_ms(timeout)
        forever = unbounded(timeout) if timeout is not None else self._forever
        while True:
            try:
                return call(ms)
            except Timeout:
                if not forever:
                    raise

    # -- key-value

    def set(self, key, value, timeout=None):
        """Set key to value (bytes or str)."""
        self._conn.set(key, to_bytes(value), to_ms(timeout))

    def get(self, key, wait=False, timeout=None, default=NotFound):
        """The value of key as bytes.  With wait=True blocks until it exists (up
        to timeout: Timeout).  Absent and not waiting: default if given, else
        NotFound."""
        try:
            if not wait:
                return self._conn.get(key, False, to_ms(timeout))
            return self._until(lambda ms: self._conn.get(key, True, ms), timeout)
        except NotFound:
            if default is NotFound:
                raise
            return default

    def add(self, key, delta=1, timeout=None):
        """Add delta to the integer at key (absent = 0); returns the new value."""
        return self._conn.add(key, check_int("delta", delta, I64_MIN, I64_MAX), to_ms(timeout))

    def compare_set(self, key, expected, desired, timeout=None):
        """TCPStore compare_set: write desired when key holds expected (or when
        key is absent and expected is empty); returns (swapped, value now)."""
        return self._conn.compare_set(key, to_bytes(expected), to_bytes(desired), to_ms(timeout))

    def delete(self, key, timeout=None):
        """Delete key; returns whether it existed."""
        return self._conn.delete(key, to_ms(timeout))

    def check(self, keys, timeout=None):
        """Whether every key exists (a str is one key)."""
        return self._conn.check(_keys(keys), to_ms(timeout))

    def wait(self, keys, timeout=None):
        """Block until every key exists; Timeout when the deadline passes first."""
        keys = _keys(keys)
        self._until(lambda ms: self._conn.wait(keys, ms), timeout)

    def multi_get(self, keys, wait=False, timeout=None):
        """The values of all keys, all or nothing (NotFound when one is absent
        and not waiting)."""
        keys = list(keys)
        if not wait:
            return self._conn.multi_get(keys, False, to_ms(timeout))
        return self._until(lambda ms: self._conn.multi_get(keys, True, ms), timeout)

    def multi_set(self, keys, values=None, timeout=None):
        """Set several keys atomically: multi_set(keys, values) or multi_set(dict)."""
        if values is None:
            keys, values = list(keys.keys()), list(keys.values())
        self._conn.multi_set(list(keys), [to_bytes(v) for v in values], to_ms(timeout))

    def append(self, key, value, timeout=None):
        """Append value to key (created when absent); returns the new length."""
        return self._conn.append(key, to_bytes(value), to_ms(timeout))

    def queue_push(self, key, value, timeout=None):
        """Append value to key's queue (TCPStore's queues); returns its length after."""
        return self._conn.queue_push(key, to_bytes(value), to_ms(timeout))

    def queue_pop(self, key, block=False, timeout=None):
        """Take the oldest value of key's queue; with block, wait for one first (Timeout when none comes).
        Returns the value, or None when the queue is empty."""
        if block:
            self.wait(key, timeout)
        _, value = self._conn.queue_pop(key, to_ms(timeout))
        return value

    def queue_len(self, key, timeout=None):
        """The length of key's queue."""
        return self._conn.queue_len(key, to_ms(timeout))

    def keys(self, prefix="", timeout=None, page=0):
        """Every key with prefix, in byte order (paged underneath; page 0 = the
        server's page size)."""
        page = check_int("page", page, 0, U32_MAX)
        out, after = [], None
        while True:
            batch, more = self._conn.list(prefix, after, page, to_ms(timeout))
            out.extend(batch)
            if not more or not batch:
                return out
            after = batch[-1]

    def num_keys(self, timeout=None):
        """Number of keys in the namespace."""
        return self._conn.num_keys(to_ms(timeout))

    def barrier(self, name, count, fetch=None, timeout=None):
        """Wait at barrier name until count arrivals; returns the round.  With
        fetch=KEY returns (round, value of KEY at release or None)."""
        count = check_int("count", count, 1, U32_MAX)
        rnd, value = self._until(lambda ms: self._conn.barrier(name, count, fetch, ms), timeout)
        return rnd if fetch is None else (rnd, value)

    def ping(self, timeout=None):
        """Round trip to the server; returns seconds taken."""
        return self._conn.ping(to_ms(timeout)) / 1e6

    # -- events

    def watch(self, prefix, timeout=None):
        """Watch keys under prefix; returns a Watch (iterate it for Events)."""
        return Watch(self, prefix, self._conn.watch(prefix, to_ms(timeout)))

    def next_event(self, timeout=None):
        """The next pushed event of any kind, or None when none came within
        timeout (0 = only what already arrived; None or no deadline = wait
        until one comes)."""
        if self._pending:
            return self._pending.pop(0)
        return self._wait_event(timeout)

    def _wait_event(self, timeout):
        """One event from the connection within timeout (None: unbounded), or None."""
        if timeout is not None and not unbounded(timeout):
            raw = self._conn.next_event(to_ms(timeout) if seconds_of(timeout) > 0 else 0)
            return Event(raw) if raw is not None else None
        while True:
            raw = self._conn.next_event(to_ms(self._POLL_S))
            if raw is not None:
                return Event(raw)

    def _next_for(self, watch_id, timeout):
        """The next event of watch_id; others are queued for next_event()."""
        for i, ev in enumerate(self._pending):
            if ev.watch_id == watch_id:
                return self._pending.pop(i)
        while True:
            ev = self._wait_event(timeout)
            if ev is None or ev.watch_id == watch_id and ev.kind in (Event.SET, Event.DELETE, Event.WATCH_ENDED):
                return ev
            self._pending.append(ev)

    @property
    def events_dropped(self):
        """Events a full queue dropped: non-zero means changes were missed."""
        return self._conn.events_dropped()

    # -- the handle

    @property
    def broken(self):
        """0 while usable, else the muster_err code that broke the connection."""
        return self._conn.info()["broken"]

    @property
    def session_id(self):
        """The server's session id for this connection."""
        return self._conn.info()["session_id"]

    def fileno(self):
        """The socket, for select/poll (changes after a failover reconnect)."""
        return self._conn.info()["fd"]

    def close(self):
        """Close the connection; later calls raise ConnectionLost."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<muster.Client {self.url or '$MUSTER_URL'}>"


def _keys(keys):
    """A list of keys from one str or an iterable of str."""
    return [keys] if isinstance(keys, str) else list(keys)


def connect(url=None, timeout=None, connect_timeout=None, name=None):
    """Connect to the store at url: tcp://HOST[:PORT][/NAMESPACE][?token=..&timeout=MS],
    tls://..., several comma-separated endpoints of an HA set, or env://
    (MASTER_ADDR/MASTER_PORT); None means $MUSTER_URL.  timeout is every
    call's default (seconds or timedelta) and, unless connect_timeout is
    given, the connect deadline too.  Raises ConnectionLost when no server
    answered in time, BadURL, Unauthenticated."""
    return Client(url, timeout=timeout, connect_timeout=connect_timeout, name=name)
