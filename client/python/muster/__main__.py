"""python3 -m muster --version: the package's version (meson's project version)."""

import argparse
import sys

from . import __version__


def main(argv=None):
    """Print the version, or a ping of a store URL."""
    ap = argparse.ArgumentParser(prog="python3 -m muster", description="muster's Python package")
    ap.add_argument("--version", action="version", version=f"muster {__version__}")
    ap.add_argument("--ping", metavar="URL", help="connect to URL and print the round trip")
    args = ap.parse_args(argv)
    if args.ping:
        from . import connect
        with connect(args.ping, timeout=10) as c:
            print(f"{c.ping() * 1e3:.3f} ms")
        return 0
    ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
