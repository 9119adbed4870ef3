#!/usr/bin/env bash
# Run the TCPStore listener's torch test (tests/tcpstore/test_torch.py) ON the
# GPU machine, whose torch (2.11) speaks the VALIDATE-era protocol with its
# libuv-era client, against musterd and the muster CLI from the release tree
# that scripts/build-carry.sh put in .carry/ (libprotobuf-c comes from
# .carry/lib, which that machine lacks).  Run from the repository root:
#   bash scripts/torch-device-test.sh
# Output: $OUT/torch-device.log (default OUT=gpu-results).  Exit status: the
# test's (0 all passed, 1 a check failed, 77 no torch.distributed).  Knobs:
# MUSTER_BUILD (default .carry/build), PYTHON (default python3),
# TCPSTORE_TEST_ONLY (comma-separated check names).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MUSTER_BUILD:-$ROOT/.carry/build}
OUT=${OUT:-$ROOT/gpu-results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
LOG=$OUT/torch-device.log

MUSTERD=$BUILD/store-server/musterd
MUSTER=$BUILD/client/cli/muster
[ -x "$MUSTER" ] || MUSTER=$BUILD/client/muster
for f in "$MUSTERD" "$MUSTER"; do
    [ -x "$f" ] || { echo "missing $f: run scripts/build-carry.sh first" | tee "$LOG"; exit 2; }
done
export LD_LIBRARY_PATH=$ROOT/.carry/lib:$BUILD/client${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

{
    echo "# TCPStore listener with the machine's torch, $(date -u +%F' '%T) UTC"
    echo "host: $(uname -srm); python: $("$PY" --version 2>&1)"
    "$PY" -c 'import torch; print("torch", torch.__version__)' 2>&1
    ldd "$MUSTERD" | grep -E 'not found' && echo "musterd is missing libraries"
    MUSTER_TEST_PYTHON=$PY bash "$ROOT/tests/tcpstore/test_torch.sh" "$MUSTERD" "$MUSTER" \
        "$ROOT/tests/tcpstore/test_torch.py"
    echo "exit status $?"
} 2>&1 | tee "$LOG"
status=$(tail -n 1 "$LOG" | awk '/^exit status/ {print $3}')
exit "${status:-1}"
