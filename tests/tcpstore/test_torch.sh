#!/bin/sh
# Run test_torch.py under a Python that has torch.distributed (Debian's
# /usr/bin/python3 by default, $MUSTER_TEST_PYTHON to pick another); exit 77
# (skipped) when there is none.  Usage: test_torch.sh MUSTERD MUSTER_CLI SCRIPT
py=${MUSTER_TEST_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
    echo "no torch.distributed under $py: skipped"
    exit 77
fi
# Gloo binds the address the host name resolves to; where /etc/hosts lacks the name, that lookup can
# take minutes.  The tests run on loopback: name the interface.
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
exec "$py" "$3" "$1" "$2"
