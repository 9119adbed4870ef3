"""Fixtures: a real musterd on 127.0.0.1 port 0 ($MUSTER_TEST_MUSTERD), read
from its port file, stopped with SIGTERM; and a URL into a fresh namespace."""

import itertools
import os
import signal
import subprocess
import time

import pytest

HOST = "127.0.0.1"
# Gloo binds the address the host name resolves to; where /etc/hosts lacks the name that lookup can
# take minutes.  Everything here runs on loopback, and every worker a test starts inherits this.
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
START_S = 10  # the port file must appear within this
STOP_S = 10   # a SIGTERM'd daemon must exit within this
_ns = itertools.count()


class Daemon:
    """One musterd process with its port, log and extra flags."""

    def __init__(self, tmp_path, *extra):
        exe = os.environ.get("MUSTER_TEST_MUSTERD")
        if not exe:
            pytest.skip("MUSTER_TEST_MUSTERD is not set")
        self.dir = tmp_path
        self.log_path = tmp_path / f"musterd-{next(_ns)}.log"
        port_file = tmp_path / f"port-{next(_ns)}"
        self.argv = [exe, "--listen", f"{HOST}:0", "--port-file", str(port_file), *extra]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + START_S
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"musterd did not start:\n{self.log_path.read_text()}")
            time.sleep(0.02)
        self.port = int(port_file.read_text())

    def url(self, ns=None, **query):
        """A tcp:// URL into namespace ns (a fresh one when None)."""
        ns = ns or f"ns{next(_ns)}"
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return f"tcp://{HOST}:{self.port}/{ns}" + (f"?{q}" if q else "")

    def kill(self):
        """SIGKILL: the daemon dies without draining."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_S)

    def stop(self):
        """SIGTERM and reap; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def daemon(tmp_path):
    """A musterd for one test."""
    d = Daemon(tmp_path)
    yield d
    d.stop()


@pytest.fixture
def url(daemon):
    """A URL into a fresh namespace of the test's musterd."""
    return daemon.url()


@pytest.fixture
def start_daemon(tmp_path):
    """A factory for musterds with extra flags, all stopped at the end."""
    started = []

    def start(*extra):
        d = Daemon(tmp_path, *extra)
        started.append(d)
        return d
    yield start
    for d in started:
        d.stop()
