"""muster.torch.MusterStore and muster:// against a real musterd: the store
assertions torch's own store tests make (test/distributed/test_store.py:
set/get/check, compare_set, wait with timeout, num_keys/delete_key, multi
ops, append, PrefixStore), gloo all-reduces over 4 processes, and a dead
daemon.  Skipped where the interpreter has no torch.distributed."""

import datetime
import os
import subprocess
import sys
import time

import pytest

dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import muster  # noqa: E402
from muster.torch import MusterStore, StoreTimeout, url_from_init_method  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "allreduce_worker.py")
WORLD = 4
CHILD_S = 120  # bound on the worker processes


@pytest.fixture
def store(url):
    s = MusterStore(url, timeout=datetime.timedelta(seconds=5))
    yield s
    s.close()


def test_set_get_check(store):
    store.set("key0", "value0")
    store.add("key1", 1)
    store.add("key1", 2)
    store.set("key2", b"value2")
    assert store.get("key0") == b"value0"
    assert store.get("key1") == b"3"
    assert store.get("key2") == b"value2"
    assert store.check(["key0", "key1", "key2"])
    assert not store.check(["key0", "missing"])


def test_add_returns_int(store):
    assert store.add("ctr", 5) == 5
    assert store.add("ctr", -2) == 3
    assert isinstance(store.add("ctr", 0), int)


def test_compare_set(store):
    # torch's test_compare_set: absent key with a wrong expected value
    assert store.compare_set("cs_key0", "wrong_old_value", "new_value0") == b"wrong_old_value"
    store.set("cs_key0", "old_value0")
    assert store.compare_set("cs_key0", "old_value0", "new_value0") == b"new_value0"
    assert store.get("cs_key0") == b"new_value0"
    assert store.compare_set("cs_key0", "wrong_old_value", "x") == b"new_value0"
    # absent key, empty expected value: created
    assert store.compare_set("cs_key1", "", "new_value1") == b"new_value1"
    assert store.get("cs_key1") == b"new_value1"


def test_wait_timeout_and_get_timeout(store):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError):
        store.wait(["never"], datetime.timedelta(milliseconds=300))
    assert 0.25 < time.monotonic() - t0 < 2.5
    store.set_timeout(datetime.timedelta(milliseconds=300))
    with pytest.raises(StoreTimeout) as ei:
        store.get("never")
    assert isinstance(ei.value, muster.Timeout) and ei.value.retryable
    store.set("there", "1")
    store.wait(["there"])  # the connection is still usable
    assert store.get("there") == b"1"
    assert store.timeout == datetime.timedelta(milliseconds=300)


def test_timeout_says_timeout_and_is_torchs_error(store):
    # torch's own store tests match assertRaisesRegex(RuntimeError, "[Tt]imeout")
    torch_error = getattr(dist, "DistStoreError", RuntimeError)
    with pytest.raises(torch_error, match="[Tt]imeout") as ei:
        store.wait(["k"], datetime.timedelta(seconds=0.25))
    assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, TimeoutError)
    assert "250 ms" in str(ei.value)
    store.set_timeout(datetime.timedelta(milliseconds=200))
    with pytest.raises(RuntimeError, match="[Tt]imeout"):
        store.get("k")
    with pytest.raises(RuntimeError, match="[Tt]imeout"):
        dist.PrefixStore("p", store).wait(["k"], datetime.timedelta(milliseconds=200))


def test_timeout_and_amount_ranges(url):
    with pytest.raises(ValueError):
        MusterStore(url, timeout=-1)
    s = MusterStore(url, timeout=float("inf"))  # no deadline: torch holds the longest libmuster carries
    assert s.timeout == datetime.timedelta(milliseconds=2**32 - 1)
    s.set_timeout(datetime.timedelta.max)
    assert s.timeout == datetime.timedelta(milliseconds=2**32 - 1)
    with pytest.raises(ValueError):
        s.set_timeout(datetime.timedelta(seconds=-1))
    with pytest.raises(ValueError):
        s.add("n", 2**63)
    with pytest.raises(TypeError):
        s.add("n", 1.5)
    assert s.add("n", 2**63 - 1) == 2**63 - 1
    with pytest.raises(ValueError, match="rank"):
        url_from_init_method("muster://h:1/j?rank=-1&world_size=2")
    with pytest.raises(ValueError, match="world_size"):
        url_from_init_method("muster://h:1/j?rank=0&world_size=0")
    with pytest.raises(ValueError, match="rank 2 is not below"):
        url_from_init_method("muster://h:1/j?rank=2&world_size=2")
    with pytest.raises(ValueError, match="timeout"):
        url_from_init_method("muster://h:1/j?rank=0&world_size=1&timeout=4294967296")
    s.close()


def test_num_keys_delete_key(store):
    store.set("key0", "value0")
    store.add("key1", 1)
    store.set("key2", "value2")
    assert store.num_keys() == 3
    assert store.delete_key("key1") is True
    assert store.delete_key("key1") is False
    assert store.num_keys() == 2
    store.set("key1", "x")
    assert store.num_keys() == 3


def test_multi_set_get_append(store):
    store.multi_set(["a", "b"], ["po", b"tato"])
    assert store.multi_get(["a", "b"]) == [b"po", b"tato"]
    store.append("a", "rk")
    store.append("new", b"x")
    assert store.get("a") == b"pork"
    assert store.get("new") == b"x"


def test_queues(store):
    store.queue_push("q", "a")
    store.queue_push("q", b"b")
    assert store.queue_len("q") == 2
    assert store.queue_pop("q") == b"a"
    assert store.queue_pop("q", block=False) == b"b"
    with pytest.raises(RuntimeError):
        store.queue_pop("q", block=False)


def test_prefix_store(store):
    p = dist.PrefixStore("job0", store)
    p.set("key", "value")
    assert p.get("key") == b"value"
    assert store.get("job0/key") == b"value"
    assert p.add("n", 4) == 4
    assert p.compare_set("key", "value", "v2") == b"v2"
    p.wait(["key"])
    with pytest.raises(RuntimeError):
        p.wait(["absent"], datetime.timedelta(milliseconds=200))
    if hasattr(p, "multi_get") and getattr(store, "has_extended_api", None):
        try:
            p.multi_set(["m1", "m2"], ["1", "2"])
        except RuntimeError:
            pass  # this torch's PrefixStore does not forward multi ops to Python stores
        else:
            assert p.multi_get(["m1", "m2"]) == [b"1", b"2"]


def test_init_method_url_parsing(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    u, r, w, t = url_from_init_method("muster://h:1/job?token=a%26b&timeout=1500&rank=2&world_size=4")
    assert (u, r, w, t) == ("tcp://h:1/job?token=a%26b&timeout=1500", 2, 4, datetime.timedelta(seconds=1.5))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert url_from_init_method("muster+tls://a:1,b:2/j") == ("tls://a:1,b:2/j", 1, 8, None)
    with pytest.raises(ValueError):
        url_from_init_method("tcp://h:1")


def _run_world(args, extra_env=None):
    """Start WORLD worker processes and return their outputs; all must exit 0."""
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1", **(extra_env or {}))
    procs = [subprocess.Popen([sys.executable, WORKER, str(rank), str(WORLD), *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(WORLD)]
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=CHILD_S)
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{out}"
    return outs


def test_gloo_allreduce_store(url):
    outs = _run_world(["store", url])
    for out in outs:
        assert "sum=10.0" in out, out


def test_gloo_allreduce_init_method(daemon):
    init = daemon.url("job-init").replace("tcp://", "muster://", 1) + "?timeout=60000"
    outs = _run_world(["init_method", init])
    for out in outs:
        assert "sum=10.0" in out, out


def test_gloo_allreduce_init_method_env_rank(daemon):
    # rank and world size from RANK/WORLD_SIZE, as a launcher sets them
    init = daemon.url("job-env").replace("tcp://", "muster://", 1)
    outs = _run_world(["init_method_env", init])
    for out in outs:
        assert "sum=10.0" in out, out


def test_dead_daemon_clear_exception_within_timeout(start_daemon):
    d = start_daemon()
    s = MusterStore(d.url(), timeout=datetime.timedelta(seconds=30))
    s.set("k", "v")
    d.kill()
    t0 = time.monotonic()
    with pytest.raises(muster.ConnectionLost) as ei:
        s.get("other")
    assert time.monotonic() - t0 < 5
    assert ei.value.retryable and isinstance(ei.value, ConnectionError)
    t0 = time.monotonic()
    with pytest.raises(muster.ConnectionLost):
        MusterStore(d.url(), timeout=datetime.timedelta(seconds=1))
    assert time.monotonic() - t0 < 3
