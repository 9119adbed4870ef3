#!/usr/bin/env bash
# examples/torch_inplace.py (muster.torch in place) through NCCL on a GPU
# machine, run ON it from the repository root after, here,
# `bash scripts/build-carry.sh && bash scripts/python-device.sh prepare`
# and carrying .carry.  N nodes of one rank each share the GPU (their own
# NCCL_HOSTID, NCCL over lo) under `muster run --recovery in-place`, with
# torch's default environment (muster.torch sets its guard variables);
# node 1's launcher is SIGKILLed once every node passed iteration 5.  Each
# run checks that the survivors finish in their first processes with world
# N-1 and one checksum per iteration, and times the kill to the next
# all-reduce on every survivor.  Knobs: RANKS (default 4), REPS (default 3).
# Output: $OUT/torch-inplace.log, $OUT/torch-inplace.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
RANKS=${RANKS:-4}
REPS=${REPS:-3}
mkdir -p "$OUT"
exec > >(tee "$OUT/torch-inplace.log") 2>&1
bash scripts/python-device.sh build || exit 2
export PYTHONPATH=$PWD/.carry/py/pkg LD_LIBRARY_PATH=$PWD/.carry/py/../lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN MUSTER_DEMO_ITERATIONS=60 MUSTER_DEMO_INTERVAL_MS=20
MUSTER=$PWD/.carry/build/client/cli/muster
MUSTERD=$PWD/.carry/build/store-server/musterd
T=$(mktemp -d /tmp/muster-ti.XXXXXX)
python3 -c 'import torch, muster; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "muster", muster.__version__)'
rows=()

# Stamp each line of stdin with the wall clock (ns) as it arrives.
stamp() { python3 -u -c 'import sys, time
for l in sys.stdin: print(time.time_ns(), l, end="", flush=True)'; }

# One run: start RANKS nodes, kill node 1 once all passed iteration 5, check and time the survivors.
one() {
    local rep=$1 i port dpid kill_ns ok=1 all
    rm -f "$T"/*
    "$MUSTERD" --listen 127.0.0.1:0 --port-file "$T/port" 2>"$T/d.log" &
    dpid=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    port=$(cat "$T/port")
    for ((i = 0; i < RANKS; i++)); do
        (NCCL_HOSTID=host-n$i exec "$MUSTER" --url "tcp://127.0.0.1:$port/ti$rep" run \
            --nnodes "$((RANKS - 1)):$RANKS" --nproc-per-node 1 --recovery in-place --max-restarts 3 \
            --node-id "n$i" --last-call 2000 python3 examples/torch_inplace.py 2>"$T/n$i.err") | stamp >"$T/n$i.out" &
        sleep 0.2
        pgrep -f -- "--node-id n$i " | head -n 1 >"$T/l$i"
    done
    for _ in $(seq 1800); do
        all=1
        for ((i = 0; i < RANKS; i++)); do grep -q "iteration 5:" "$T/n$i.out" 2>/dev/null || all=0; done
        [ $all = 1 ] && break
        sleep 0.05
    done
    kill_ns=$(date +%s%N)
    kill -9 "$(cat "$T/l1")"
    for ((i = 0; i < RANKS; i++)); do
        [ "$i" = 1 ] && continue
        for _ in $(seq 1200); do grep -q "finished" "$T/n$i.out" && break; kill -0 "$(cat "$T/l$i")" 2>/dev/null || break; sleep 0.1; done
        grep -q "finished 60 iterations: world $((RANKS - 1))" "$T/n$i.out" ||
            { ok=0; echo "run $rep: n$i did not finish with world $((RANKS - 1))"; tail -n 30 "$T/n$i.err"; }
        [ "$(grep -o ' pid [0-9]*' "$T/n$i.out" | sort -u | wc -l)" = 1 ] || { ok=0; echo "run $rep: n$i changed process"; }
    done
    sleep 1
    kill "$dpid" 2>/dev/null
    for ((i = 0; i < RANKS; i++)); do cp "$T/n$i.out" "$OUT/n$i-$rep.out"; cp "$T/n$i.err" "$OUT/n$i-$rep.err"; done
    local ms checks
    ms=$(python3 - "$OUT" "$rep" "$kill_ns" <<'PY'
import glob, re, sys
out, rep, kill = sys.argv[1], sys.argv[2], int(sys.argv[3])
worst, sums = 0, {}
for f in sorted(glob.glob(f"{out}/n*-{rep}.out")):
    if f.endswith(f"n1-{rep}.out"):
        continue
    first = None
    for line in open(f):
        m = re.match(r"(\d+) \[Rank \d+\] pid \d+ generation (\d+) world \d+ iteration (\d+): sum \S+ checksum (\S+)", line)
        if not m:
            continue
        sums.setdefault((m.group(2), m.group(3)), set()).add(m.group(4))
        if first is None and int(m.group(2)) > 1:
            first = int(m.group(1)) - kill
    worst = max(worst, first or 0)
agree = all(len(v) == 1 for v in sums.values())
print(f"{worst / 1e6:.0f} {'yes' if agree else 'NO'}")
PY
)
    checks=${ms#* }
    [ "$checks" = yes ] || ok=0
    rows+=("| $rep | $([ $ok = 1 ] && echo PASS || echo FAIL) | ${ms% *} ms | $checks |")
}

for ((r = 1; r <= REPS; r++)); do one "$r"; done
{
    echo "# examples/torch_inplace.py in place through NCCL, $RANKS ranks sharing one GPU, node 1 SIGKILLed"
    echo
    echo "| run | survivors finished in their first processes with world $((RANKS - 1)) | kill to next all-reduce, slowest survivor | one checksum per iteration |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$OUT/torch-inplace.md"
cat "$OUT/torch-inplace.md"
