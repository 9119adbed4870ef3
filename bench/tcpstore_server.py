#!/usr/bin/python3
"""Run torch's own TCPStore server (the master side) and nothing else, for the benchmarks.

Usage: /usr/bin/python3 tcpstore_server.py PORT [--port-file PATH]

The server binds the wildcard address whatever host it is given, so this refuses to run
outside a private network namespace (one whose only interface is lo).  It writes
"PORT PID" to the port file once listening and sleeps until SIGTERM/SIGINT.
"""
import datetime
import os
import signal
import sys
import time


def only_loopback():
    """True when lo is the only network interface of this namespace."""
    with open("/proc/net/dev") as f:
        names = [line.split(":")[0].strip() for line in f if ":" in line]
    return names == ["lo"]


def main():
    """Start the store and keep it alive until a stop signal."""
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if not only_loopback():
        sys.exit("tcpstore_server.py: refusing to bind the wildcard address outside a private "
                 "network namespace (run it under `unshare -n`)")
    import torch.distributed as dist

    port = int(sys.argv[1])
    # world_size None + wait_for_workers False: the server does not wait for anyone.
    store = dist.TCPStore("127.0.0.1", port, None, True, datetime.timedelta(seconds=600),
                          wait_for_workers=False)
    # torch 2.x serves with libuv unless told otherwise; 1.x has only the older server.
    print("backend: %s" % ("libuv" if getattr(store, "libuvBackend", False) else "legacy"), flush=True)
    if "--port-file" in sys.argv:
        path = sys.argv[sys.argv.index("--port-file") + 1]
        with open(path + ".tmp", "w") as f:
            f.write("%d %d\n" % (port, os.getpid()))
        os.rename(path + ".tmp", path)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    del store


if __name__ == "__main__":
    main()
