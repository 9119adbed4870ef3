"""The Python package across an --ha failover: one etcd member and two
musterd daemons on loopback.  A Client and a MusterStore on a URL that lists
both endpoints (standby first) reach the leader; when the leader is
SIGKILLed they go on by themselves on the new one: acknowledged keys are
there, a get parked on the old leader is sent again and completes when its
key is set on the new one, and torch's wait does the same.  Skipped without
etcd."""

import datetime
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

import muster
from conftest import Daemon

# The lease of the set (ms), and how long a failover may take from the kill:
# the lease running out, the standby's election and the client's backoff.
TTL_MS = 2000
FAILOVER_S = TTL_MS / 1000 + 10


def _etcd_start_s():
    """How long etcd may take to start: 20 s, stretched by the one-minute load
    per CPU on a loaded machine (as tests/ha/hetcd.c does), at most 60 s."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(60.0, 20.0 * max(1.0, load))


def _free_port():
    """A loopback port nothing listens on now (etcd takes no port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def etcd(tmp_path):
    """One etcd member on loopback; yields its client endpoint."""
    if not shutil.which("etcd"):
        pytest.skip("no etcd (apt-get install etcd-server)")
    client, peer = _free_port(), _free_port()
    curl, purl = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    log = open(tmp_path / "etcd.log", "w")
    proc = subprocess.Popen(["etcd", "--name", "e0", "--data-dir", str(tmp_path / "etcd"),
                             "--listen-client-urls", curl, "--advertise-client-urls", curl,
                             "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                             "--initial-cluster", f"e0={purl}", "--heartbeat-interval", "50",
                             "--election-timeout", "500"], stdout=log, stderr=log)
    start = time.monotonic()
    while True:
        try:
            socket.create_connection(("127.0.0.1", client), timeout=1).close()
            break
        except OSError:
            if time.monotonic() - start > _etcd_start_s() or proc.poll() is not None:
                proc.kill()
                pytest.fail("etcd did not start: " + (tmp_path / "etcd.log").read_text()[-2000:])
            time.sleep(0.05)
    yield f"127.0.0.1:{client}"
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _until(fn, seconds, what):
    """Call fn until it returns without a retryable muster error; its value."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except muster.Error as e:
            if not e.retryable or time.monotonic() > deadline:
                raise AssertionError(f"{what}: {e!r}") from e
            time.sleep(0.05)


@pytest.fixture
def ha_pair(tmp_path, etcd):
    """Two daemons of one --ha set; the first is the leader.  Yields (leader, standby, url)."""
    flags = ("--ha", f"etcd://{etcd}/muster-pytest", "--ha-ttl", str(TTL_MS))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Daemon(tmp_path / "a", *flags)
    _until(lambda: muster.connect(a.url("ha"), timeout=2).set("elected", "a"), 15, "the first daemon leads")
    b = Daemon(tmp_path / "b", *flags)
    url = f"tcp://127.0.0.1:{b.port},127.0.0.1:{a.port}/ha"
    yield a, b, url
    a.stop()
    b.stop()


def test_client_rides_out_a_failover(ha_pair):
    a, b, url = ha_pair
    c = muster.connect(url, timeout=FAILOVER_S)
    c.set("acked", "before")                      # through the standby's redirect to the leader
    assert muster.connect(a.url("ha"), timeout=5).get("acked") == b"before"
    parked = {}
    t = threading.Thread(target=lambda: parked.setdefault(
        "v", muster.connect(url, timeout=FAILOVER_S * 2).get("late", wait=True, timeout=FAILOVER_S * 2)))
    t.start()
    time.sleep(0.5)                               # the get is parked on the leader
    killed = time.monotonic()
    a.kill()
    c.set("after", "x")                           # the handle finds the new leader by itself
    took = time.monotonic() - killed
    assert took <= FAILOVER_S, took
    assert c.get("acked") == b"before"            # replicated before it was acknowledged
    assert c.get("after") == b"x"
    c.set("late", "here")
    t.join(FAILOVER_S * 2)
    assert not t.is_alive()
    assert parked.get("v") == b"here"             # the parked get was sent again and completed
    c.close()


def test_muster_store_rides_out_a_failover(ha_pair):
    torch_mod = pytest.importorskip("muster.torch")
    a, b, url = ha_pair
    store = torch_mod.MusterStore(url, timeout=datetime.timedelta(seconds=FAILOVER_S * 2))
    store.set("k", "v")
    assert store.add("n", 2) == 2
    waited = {}

    def waiter():
        w = torch_mod.MusterStore(url, timeout=datetime.timedelta(seconds=FAILOVER_S * 2))
        w.wait(["ready"])
        waited["v"] = w.get("ready")

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)
    a.kill()
    assert store.get("k") == b"v"
    assert store.add("n", 3) == 5
    store.set("ready", "go")
    t.join(FAILOVER_S * 2)
    assert not t.is_alive()
    assert waited.get("v") == b"go"
