#!/usr/bin/env bash
# The seed demo as a user runs it: `muster run --standalone --nproc-per-node N
# hello_allreduce` prints, for every rank r, "[Rank r] Before all_reduce:
# [r+1.0]" and "[Rank r] After all_reduce: [N(N+1)/2.0]".  With no GPU the
# demo must also say that it reduces through the store.  Then the demo by
# hand against a daemon, the way a worker runs without the launcher, and
# without RANK (exit 2 with a clear message).
# Usage: test_demo.sh MUSTER HELLO_ALLREDUCE MUSTERD
set -uo pipefail
muster=${1:?muster}
hello=${2:?hello_allreduce}
musterd=${3:?musterd}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-demo-XXXXXX")
dpid=
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
checks=0

# Count a check: ok NAME, or fail NAME DETAIL (printing the output file).
ok() { checks=$((checks + 1)); echo "ok   $1"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1: $2"; cat "$3"; }

# Check that file holds the right Before/After lines for every rank of n.
lines_ok() {
    local file=$1 n=$2 r sum=$(($2 * ($2 + 1) / 2))
    for ((r = 0; r < n; r++)); do
        grep -qx "\[Rank $r\] Before all_reduce: \[$((r + 1)).0\]" "$file" || return 1
        grep -qx "\[Rank $r\] After all_reduce: \[$sum.0\]" "$file" || return 1
    done
    [ "$(grep -c 'After all_reduce' "$file")" -eq "$n" ]
}

# Whether this machine would take the GPU path (then the label is absent).
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1

for n in 1 3 4; do
    out=$tmp/run_$n.txt
    timeout 60 "$muster" run --standalone --nproc-per-node "$n" "$hello" >"$out" 2>"$tmp/run_$n.err"
    rc=$?
    if [ $rc -eq 0 ] && lines_ok "$out" "$n"; then
        ok "muster run --standalone --nproc-per-node $n: every rank prints [$((n * (n + 1) / 2)).0]"
    else
        fail "muster run, $n ranks" "exit $rc" "$out"
        cat "$tmp/run_$n.err"
    fi
    if [ $gpu = 1 ] || [ "$(grep -c '^\[Rank [0-9]*\] no CUDA device: reducing through the store$' "$out")" -eq "$n" ]; then
        ok "$n ranks: the store path is labelled on every rank"
    else
        fail "$n ranks: label" "no 'no CUDA device' line per rank" "$out"
    fi
done

# By hand, as a worker would run without the launcher: 2 ranks, generation 5.
"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" 2>"$tmp/musterd.log" &
dpid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
url=tcp://127.0.0.1:$(cat "$tmp/port")/demo
pids=()
for r in 0 1; do
    MUSTER_URL=$url RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MUSTER_GENERATION=5 MUSTER_DEMO_TIMEOUT_MS=20000 \
        timeout 60 "$hello" >"$tmp/hand_$r.txt" 2>&1 &
    pids+=($!)
done
rcs=0
for p in "${pids[@]}"; do wait "$p" || rcs=$?; done
cat "$tmp"/hand_*.txt >"$tmp/hand.txt"
if [ $rcs -eq 0 ] && lines_ok "$tmp/hand.txt" 2; then
    ok "by hand, 2 ranks of generation 5: [3.0]"
else
    fail "by hand" "exit $rcs" "$tmp/hand.txt"
fi

# A lone rank of a world of 2 gives up at its deadline instead of hanging.
start=$(date +%s%N)
MUSTER_URL=$url RANK=0 WORLD_SIZE=2 MUSTER_GENERATION=6 MUSTER_DEMO_TIMEOUT_MS=500 \
    timeout 30 "$hello" >"$tmp/lone.txt" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ $rc -eq 1 ] && [ $ms -lt 10000 ] && grep -q "deadline passed" "$tmp/lone.txt"; then
    ok "a rank without peers exits 1 at its deadline (${ms} ms)"
else
    fail "lone rank" "exit $rc after ${ms} ms" "$tmp/lone.txt"
fi

# Without the launcher's variables: usage error, exit 2.
env -u RANK -u WORLD_SIZE timeout 10 "$hello" >"$tmp/noenv.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "RANK and WORLD_SIZE must be set" "$tmp/noenv.txt"; then
    ok "without RANK/WORLD_SIZE: exit 2 and says why"
else
    fail "no env" "exit $rc" "$tmp/noenv.txt"
fi

echo "demo: $checks checks, $fails failed"
[ $fails -eq 0 ]
