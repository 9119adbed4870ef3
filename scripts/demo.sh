#!/usr/bin/env bash
# Build muster, start musterd on a free local port, run a short session of
# the muster CLI against it (set, get, add, a three-way barrier), stop it;
# then run the all-reduce demo (four C workers launched by `muster run`) and
# the seed lesson's torch script, unmodified torch.distributed under
# `muster run` (NCCL on a GPU, gloo without one).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d build/meson-private ]; then
    meson setup build >/dev/null
fi
ninja -C build >/dev/null
MUSTERD=build/store-server/musterd
MUSTER=build/client/cli/muster

tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-demo-XXXXXX")
pid=
# Stop the daemon (if still running) and remove the temp dir.
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

"$MUSTERD" --listen 127.0.0.1:0 --port-file "$tmp/port" 2>"$tmp/musterd.log" &
pid=$!
for _ in $(seq 1 500); do
    grep -q . "$tmp/port" 2>/dev/null && break
    sleep 0.01
done
port=$(head -n 1 "$tmp/port")
echo "musterd (pid $pid) listening on 127.0.0.1:$port"
export MUSTER_URL="tcp://127.0.0.1:$port/demo"

# Print a CLI command (quoted as a shell would need it), then run it.
run() {
    printf '$ muster'
    printf ' %q' "$@"
    echo
    "$MUSTER" "$@"
}

run set greeting "hello from muster"
run get greeting
echo "   (get prints the value byte for byte, without a newline)"
run add counter 5
run add counter 10
run check greeting counter && echo "(both keys present)"
echo "\$ muster barrier start 3   # three processes meet"
waiters=()
for i in 1 2 3; do
    ("$MUSTER" --timeout 10000 barrier start 3 >/dev/null && echo "  process $i passed the barrier") &
    waiters+=($!)
done
for w in "${waiters[@]}"; do
    wait "$w"
done
run num-keys
run ping

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
echo "musterd stopped (exit status $status)"
[ "$status" = 0 ]

echo
echo "\$ muster run --standalone --nproc-per-node 4 hello_allreduce"
"$MUSTER" run --standalone --nproc-per-node 4 build/examples/hello_allreduce

# Debian's python3 has torch (scripts/deps.sh); another python3 first on PATH may not.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    py=/usr/bin/python3
fi
echo
echo "\$ muster run --standalone --nproc-per-node 4 python3 examples/distributed_hello.py"
# Block-buffered workers write whole lines, so the four workers' lines do not cut into each other.
PYTHONUNBUFFERED= "$MUSTER" run --standalone --nproc-per-node 4 "$py" examples/distributed_hello.py
