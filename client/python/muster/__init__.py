"""muster: Python client for the musterd key-value and rendezvous daemon.

    import muster
    with muster.connect("tcp://host:29600/job?token=T", timeout=30) as c:
        c.set("k", b"v")
        c.get("k")                     # b"v"
        c.get("other", wait=True)      # blocks until set, or muster.Timeout

The binding is a CPython extension (muster._core) over libmuster; see
muster.client for threads and timeouts, muster.errors for exceptions,
muster.rdzv for the native rendezvous, muster.torch for a
torch.distributed.Store and the muster:// init_method, and
muster.torchrun for the torchrun rendezvous backend.
"""

from . import _core
from .client import Client, Event, Watch, connect
from .errors import *  # noqa: F401,F403 (the exception classes)
from .errors import BY_CODE, Error

__version__ = _core.version

_core._set_errors(Error, dict(BY_CODE))

__all__ = ["Client", "Event", "Watch", "connect", "__version__"] + [c.__name__ for c in BY_CODE.values()] + [
    "Error"]
