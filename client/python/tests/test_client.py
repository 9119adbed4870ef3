"""muster.Client against a real musterd: every operation, the exceptions
mapped from muster_err, timeouts that leave the connection usable, threads
and the GIL, and a dead daemon."""

import datetime
import threading
import time

import pytest

import muster
import muster.rdzv


def test_set_get_bytes_and_str(url):
    with muster.connect(url, timeout=5) as c:
        c.set("k", b"\x00\xffbin")
        assert c.get("k") == b"\x00\xffbin"
        c.set("s", "text")
        assert c.get("s") == b"text"
        assert c.get("absent", default=None) is None
        with pytest.raises(muster.NotFound) as ei:
            c.get("absent")
        assert ei.value.code == 1 and not ei.value.retryable
        assert isinstance(ei.value, KeyError)


def test_add_compare_set_delete_check(url):
    with muster.connect(url, timeout=5) as c:
        assert c.add("n", 5) == 5
        assert c.add("n", -7) == -2
        assert c.get("n") == b"-2"
        assert c.compare_set("cs", b"", b"first") == (True, b"first")
        assert c.compare_set("cs", b"wrong", b"x") == (False, b"first")
        assert c.compare_set("cs", "first", "second") == (True, b"second")
        assert c.check(["n", "cs"]) is True
        assert c.check("n") is True
        assert c.check(["n", "nope"]) is False
        assert c.delete("n") is True
        assert c.delete("n") is False
        assert c.num_keys() == 1
        c.set("txt", "abc")
        with pytest.raises(muster.NotANumber):
            c.add("txt", 1)


def test_multi_append_keys(url):
    with muster.connect(url, timeout=5) as c:
        c.multi_set(["a", "b"], [b"1", "2"])
        c.multi_set({"c": b"3"})
        assert c.multi_get(["a", "b", "c"]) == [b"1", b"2", b"3"]
        with pytest.raises(muster.NotFound):
            c.multi_get(["a", "zz"])
        assert c.append("log", b"ab") == 2
        assert c.append("log", "cd") == 4
        assert c.get("log") == b"abcd"
        for i in range(30):
            c.set(f"p/{i:02d}", b"")
        assert c.keys("p/", page=7) == [f"p/{i:02d}" for i in range(30)]
        assert c.keys() == ["a", "b", "c", "log"] + [f"p/{i:02d}" for i in range(30)]
        assert c.num_keys() == 34
        assert 0 < c.ping() < 5


def test_queues(url):
    with muster.connect(url, timeout=5) as c, muster.connect(url, timeout=5) as other:
        assert c.queue_pop("jobs") is None
        assert c.queue_push("jobs", b"a") == 1
        assert c.queue_push("jobs", "bb") == 2
        assert c.queue_len("jobs") == 2
        assert c.check("jobs") is True  # a non-empty queue makes its key present
        assert c.num_keys() == 0  # queues are not keys
        assert c.queue_pop("jobs") == b"a"
        assert c.queue_pop("jobs", block=True) == b"bb"
        timer = threading.Timer(0.2, lambda: other.queue_push("jobs", b"late"))
        timer.start()
        assert c.queue_pop("jobs", block=True, timeout=5) == b"late"
        timer.join()
        with pytest.raises(muster.Timeout):
            c.queue_pop("jobs", block=True, timeout=0.2)


def test_blocking_get_and_wait_released_by_other_client(url):
    with muster.connect(url, timeout=5) as c, muster.connect(url, timeout=5) as other:
        timer = threading.Timer(0.2, lambda: other.set("late", b"here"))
        timer.start()
        t0 = time.monotonic()
        assert c.get("late", wait=True, timeout=5) == b"here"
        assert 0.1 < time.monotonic() - t0 < 4
        timer.join()
        threading.Timer(0.1, lambda: other.multi_set(["w1", "w2"], [b"", b""])).start()
        c.wait(["w1", "w2"], timeout=datetime.timedelta(seconds=5))
        assert c.multi_get(["w1", "w2"], wait=True) == [b"", b""]


def test_timed_out_wait_leaves_connection_usable(url):
    with muster.connect(url, timeout=5) as c:
        t0 = time.monotonic()
        with pytest.raises(muster.Timeout) as ei:
            c.wait(["never"], timeout=0.3)
        took = time.monotonic() - t0
        assert 0.25 < took < 2.0, took
        assert ei.value.retryable and ei.value.code == 2
        assert "never" in ei.value.detail
        assert isinstance(ei.value, TimeoutError)
        with pytest.raises(muster.Timeout):
            c.get("never", wait=True, timeout=datetime.timedelta(milliseconds=200))
        assert c.broken == 0
        c.set("after", b"ok")
        assert c.get("after") == b"ok"


def test_timeout_message_says_timeout(url):
    with muster.connect(url, timeout=5) as c:
        with pytest.raises(muster.Timeout, match="^Timeout: ") as ei:
            c.wait(["k"], datetime.timedelta(seconds=0.25))
        assert "timed out after 250 ms" in str(ei.value)
        assert ei.value.message == "deadline passed before the operation completed"


def test_integer_and_timeout_arguments_range_checked(url):
    with muster.connect(url, timeout=5) as c:
        for bad in (-1, 0, 2**32):
            with pytest.raises(ValueError, match="count"):
                c.barrier("b", bad)
        with pytest.raises(TypeError, match="count"):
            c.barrier("b", 2.0)
        for bad in (2**63, -2**63 - 1):
            with pytest.raises(ValueError, match="delta"):
                c.add("n", bad)
        assert c.add("n", -2**63) == -2**63
        with pytest.raises(ValueError, match="page"):
            c.keys(page=-1)
        for bad in (-1, float("nan"), datetime.timedelta(seconds=-1)):
            with pytest.raises(ValueError, match="timeout"):
                c.get("k", wait=True, timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                c.next_event(timeout=bad)
        with pytest.raises(TypeError, match="timeout"):
            c.set("k", b"v", timeout="soon")
        with pytest.raises(ValueError, match="local_world_size"):
            muster.rdzv.Node(url, node_id="n", local_world_size=-1)
        with pytest.raises(ValueError, match="max_nodes"):
            muster.rdzv.Node(url, node_id="n", min_nodes=3, max_nodes=2)
        with pytest.raises(ValueError, match="last_call"):
            muster.rdzv.Node(url, node_id="n", min_nodes=1, max_nodes=2, last_call=float("inf"))
        assert c.broken == 0 and c.num_keys() == 1  # nothing reached the server


def test_infinite_timeout_means_no_deadline(start_daemon):
    # The server cuts every deadline to --max-wait-timeout (300 ms here): a
    # call with no deadline waits again each time it passes.
    d = start_daemon("--max-wait-timeout", "300", "--wait-timeout", "300")
    url = d.url()
    with muster.connect(url, timeout=5) as c, muster.connect(url, timeout=5) as other:
        threading.Timer(1.0, lambda: other.set("late", b"1")).start()
        assert c.get("late", wait=True, timeout=float("inf")) == b"1"
        threading.Timer(1.0, lambda: other.set("late2", b"2")).start()
        c.wait(["late2"], timeout=datetime.timedelta.max)
        threading.Timer(1.0, lambda: other.barrier("b", 2, timeout=5)).start()
        assert c.barrier("b", 2, timeout=float("inf")) == 1
        with pytest.raises(muster.Timeout):
            c.get("never", wait=True, timeout=5)  # a finite deadline is cut by the server
        threading.Timer(0.5, lambda: other.set("ev/x", b"")).start()
        with c.watch("ev/") as w:
            assert w.next(timeout=float("inf")).key == "ev/x"
    with muster.connect(url, timeout=float("inf"), connect_timeout=5) as c, muster.connect(url, timeout=5) as other:
        threading.Timer(1.0, lambda: other.set("late3", b"3")).start()
        assert c.get("late3", wait=True) == b"3"  # the client's default: no deadline


def test_barrier_with_fetch(url):
    results = []

    def arrive(i):
        with muster.connect(url, timeout=5) as c:
            if i == 0:
                c.set("leader", b"id-0")
            results.append(c.barrier("start", 3, fetch="leader" if i else None))

    threads = [threading.Thread(target=arrive, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 3
    rounds = sorted(r if isinstance(r, int) else r[0] for r in results)
    assert len(set(rounds)) == 1
    fetched = [r for r in results if isinstance(r, tuple)]
    assert len(fetched) == 2
    # rank 0 set the key before arriving, so the release carries it
    assert all(v == b"id-0" for _, v in fetched)


def test_watch_iterates_events(url):
    with muster.connect(url, timeout=5) as c, muster.connect(url, timeout=5) as other:
        with c.watch("cfg/") as w:
            other.set("cfg/a", b"1")
            other.set("elsewhere", b"x")
            other.delete("cfg/a")
            events = [next(iter(w)), w.next(timeout=5)]
            assert [(e.kind, e.key) for e in events] == [("set", "cfg/a"), ("delete", "cfg/a")]
            assert events[0].value == b"1"
            assert w.next(timeout=0.1) is None
        assert c.events_dropped == 0


def test_gil_released_during_blocking_call(url):
    with muster.connect(url, timeout=5) as c:
        ticks = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.01)

        t = threading.Thread(target=spin)
        t.start()
        with pytest.raises(muster.Timeout):
            c.get("nothing", wait=True, timeout=0.5)
        stop.set()
        t.join()
        assert len(ticks) >= 20  # the other thread ran while the get blocked


def test_threads_share_one_client(url):
    with muster.connect(url, timeout=10) as c:
        def work():
            for _ in range(200):
                c.add("ctr", 1)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert c.add("ctr", 0) == 800


def test_set_beside_blocked_get_on_one_client(url):
    with muster.connect(url, timeout=10) as c:
        got = []
        t = threading.Thread(target=lambda: got.append(c.get("shared/k", wait=True, timeout=10)))
        t.start()
        time.sleep(0.2)  # the get is parked at the server
        slowest = 0.0
        for i in range(20):
            start = time.monotonic()
            c.set("shared/%d" % i, "v")
            slowest = max(slowest, time.monotonic() - start)
        assert slowest < 0.5  # not held up by the blocked get on the other thread
        c.set("shared/k", "released")
        t.join(10)
        assert got == [b"released"]


def test_close_waits_for_blocked_call_on_other_thread(url):
    c = muster.connect(url, timeout=10)
    errors = []

    def blocked():
        try:
            c.get("never/k", wait=True, timeout=0.5)
        except muster.Timeout as e:
            errors.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.1)
    c.close()  # returns once the get timed out
    t.join(5)
    assert len(errors) == 1
    with pytest.raises(muster.ConnectionLost):
        c.set("k", "v")


def test_errors_unauthenticated_limit_badurl(start_daemon):
    d = start_daemon("--token", "secure=s3cret", "--max-value", "1024", "--auth-backoff", "0")
    with pytest.raises(muster.Unauthenticated) as ei:
        muster.connect(d.url("secure", token="wrong"), timeout=2)
    assert not ei.value.retryable and ei.value.detail
    with muster.connect(d.url("secure", token="s3cret"), timeout=2) as c:
        with pytest.raises(muster.LimitExceeded) as ei:
            c.set("big", b"x" * 4096)
        assert ei.value.code == 6 and ei.value.detail
        c.set("small", b"x")  # still usable
    with pytest.raises(muster.BadURL):
        muster.connect("tcp://127.0.0.1:99999/x", timeout=1)
    with pytest.raises(ValueError):
        muster.connect("tcp://127.0.0.1:1/x?bogus=1", timeout=1)


def test_closed_client_raises_connection_lost(url):
    c = muster.connect(url, timeout=5)
    c.close()
    with pytest.raises(muster.ConnectionLost) as ei:
        c.set("k", b"v")
    assert "closed" in ei.value.detail and ei.value.retryable
    c.close()  # twice is fine


def test_dead_daemon_connect_fails_within_timeout(start_daemon):
    d = start_daemon()
    url = d.url()
    d.kill()
    t0 = time.monotonic()
    with pytest.raises(muster.ConnectionLost) as ei:
        muster.connect(url, timeout=1.0)
    assert time.monotonic() - t0 < 3.0
    assert ei.value.retryable
    assert isinstance(ei.value, ConnectionError)


def test_daemon_dies_during_blocking_get(start_daemon):
    d = start_daemon()
    c = muster.connect(d.url(), timeout=30)
    threading.Timer(0.3, d.kill).start()
    t0 = time.monotonic()
    with pytest.raises(muster.ConnectionLost):
        c.get("never", wait=True, timeout=20)
    assert time.monotonic() - t0 < 5.0  # the loss is seen at once, not at the deadline
    with pytest.raises(muster.ConnectionLost):
        c.ping()
    c.close()


def test_error_classes_match_codes():
    for code, cls in muster.errors.BY_CODE.items():
        assert issubclass(cls, muster.Error)
        assert muster._core.retryable(code) in (True, False)
    assert muster._core.retryable(2) and muster._core.retryable(101)
    assert not muster._core.retryable(1)
