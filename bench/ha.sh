#!/bin/bash
# The cost of high availability: write latency (set, closed loop, 1 and 16
# clients, p50/p99) of musterd in memory, with --data-dir --fsync=always, and
# with --ha against a 3-member etcd on loopback (etcd's data on tmpfs, then on
# disk); then the failover time (leader SIGKILLed until the standby
# acknowledges a write) over 5 trials.  Writes bench/results/ha.md.
#
#   bench/ha.sh [BUILD_DIR]        (default: build; about a minute and a half)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
MUSTERD=$BUILD/store-server/musterd
LG=$BUILD/bench/muster-loadgen
CLI=$BUILD/client/cli/muster
OUT=$ROOT/bench/results/ha.md
SECS=${HA_BENCH_SECS:-3}
WORK=$(mktemp -d /var/tmp/muster-ha-bench.XXXXXX)
SHM=$(mktemp -d /dev/shm/muster-ha-bench.XXXXXX)
PIDS=()

for b in "$MUSTERD" "$LG" "$CLI"; do
    [ -x "$b" ] || { echo "ha.sh: $b missing: ninja -C $BUILD first" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "ha.sh: etcd is not installed (scripts/deps.sh)" >&2; exit 2; }

# SIGKILL process $1 and reap it quietly.
kill9() {
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# Kill everything started here and remove the scratch directories.
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

# Start a 3-member etcd cluster with its data under $1, ports from $2; sets EPS.
etcd_start() {
    local dir=$1 base=$2 cluster="" i
    for i in 0 1 2; do cluster+="e$i=http://127.0.0.1:$((base + 10 + i)),"; done
    EPS=""
    for i in 0 1 2; do
        etcd --name "e$i" --data-dir "$dir/e$i" --listen-client-urls "http://127.0.0.1:$((base + i))" \
            --advertise-client-urls "http://127.0.0.1:$((base + i))" \
            --listen-peer-urls "http://127.0.0.1:$((base + 10 + i))" \
            --initial-advertise-peer-urls "http://127.0.0.1:$((base + 10 + i))" \
            --initial-cluster "${cluster%,}" --initial-cluster-state new \
            --heartbeat-interval 50 --election-timeout 500 >"$dir/e$i.log" 2>&1 &
        PIDS+=($!)
        EPS+="127.0.0.1:$((base + i)),"
    done
    EPS=${EPS%,}
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$base/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "ha.sh: etcd did not come up (logs in $dir)" >&2
    return 1
}

# Start musterd with extra flags; sets MPID and MPORT_ (its port).
musterd_start() {
    local name=$1
    shift
    rm -f "$WORK/$name.port"
    "$MUSTERD" --listen 127.0.0.1:0 --port-file "$WORK/$name.port" --log-file "$WORK/$name.log" "$@" &
    MPID=$!
    PIDS+=($MPID)
    for _ in $(seq 100); do
        [ -s "$WORK/$name.port" ] && break
        sleep 0.05
    done
    MPORT_=$(cat "$WORK/$name.port")
}

# Whether a set through the daemon on port $1 is acknowledged (within $2 ms).
acked() {
    "$CLI" -u "tcp://127.0.0.1:$1/bench" -t "${2:-500}" set probe x >/dev/null 2>&1
}

# Wait until the daemon on port $1 acknowledges writes (bounded).
await_serving() {
    for _ in $(seq 200); do
        acked "$1" && return 0
        sleep 0.05
    done
    return 1
}

# One closed-loop set run against port $1 with $2 clients: "p50 p99" in microseconds.
measure() {
    "$LG" --port "$1" --op set --conns "$2" --duration "$SECS" --requests 100000000 --timeout 60 |
        python3 -c 'import json,sys; l=json.loads(sys.stdin.read().strip().splitlines()[-1])["latency_us"]; print("%.0f %.0f" % (l["p50"], l["p99"]))'
}

ROWS=()
# Measure the daemon on port $1 as configuration $2 with 1 and 16 clients.
row() {
    local one sixteen
    one=$(measure "$1" 1)
    sixteen=$(measure "$1" 16)
    ROWS+=("| $2 | ${one% *} | ${one#* } | ${sixteen% *} | ${sixteen#* } |")
    echo "  $2: 1 client p50/p99 ${one/ //} us, 16 clients ${sixteen/ //} us" >&2
}

echo "[ha.sh] in memory" >&2
musterd_start mem
row "$MPORT_" "in memory"
kill9 "$MPID"

echo "[ha.sh] --data-dir --fsync=always (on $(df --output=fstype "$WORK" | tail -1))" >&2
musterd_start disk --data-dir "$WORK/data" --fsync always
row "$MPORT_" "--data-dir --fsync=always"
kill9 "$MPID"

echo "[ha.sh] --ha, etcd data on tmpfs" >&2
etcd_start "$SHM" 23790
musterd_start ha1 --ha "etcd://$EPS/bench" --ha-ttl 2000
await_serving "$MPORT_"
row "$MPORT_" "--ha, etcd on tmpfs"
HA1=$MPID
HA1_PORT=$MPORT_

echo "[ha.sh] failover, 5 trials" >&2
musterd_start ha2 --ha "etcd://$EPS/bench" --ha-ttl 2000
HA2=$MPID
HA2_PORT=$MPORT_
FAIL=()
for t in 1 2 3 4 5; do
    t0=$(date +%s%N)
    kill9 "$HA1"
    await_serving "$HA2_PORT" || { echo "ha.sh: no failover" >&2; exit 1; }
    t1=$(date +%s%N)
    FAIL+=($(((t1 - t0) / 1000000)))
    echo "  trial $t: $(((t1 - t0) / 1000000)) ms" >&2
    musterd_start "ha1-$t" --ha "etcd://$EPS/bench" --ha-ttl 2000
    HA1=$HA2
    HA1_PORT=$HA2_PORT
    HA2=$MPID
    HA2_PORT=$MPORT_
    sleep 0.5 # the new standby reads the log before the next kill
done
for p in "${PIDS[@]}"; do kill9 "$p"; done
PIDS=()

echo "[ha.sh] --ha, etcd data on disk" >&2
mkdir -p "$WORK/etcd"
etcd_start "$WORK/etcd" 23890
musterd_start ha3 --ha "etcd://$EPS/bench" --ha-ttl 2000
await_serving "$MPORT_"
row "$MPORT_" "--ha, etcd on disk ($(df --output=fstype "$WORK" | tail -1))"

mkdir -p "$(dirname "$OUT")"
{
    echo "# High availability: write latency and failover"
    echo
    echo "Command: \`bench/ha.sh $BUILD\` ($SECS s per point; $(nproc) CPUs; $(etcd --version | head -1);"
    echo "git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u +%F))."
    echo "Closed-loop \`set\` of 64-byte values over 1000 keys, muster-loadgen on loopback; etcd is a 3-member"
    echo "cluster on loopback (heartbeat 50 ms, election timeout 500 ms); --ha-ttl 2 s."
    echo
    echo "| configuration | 1 client p50 (us) | 1 client p99 (us) | 16 clients p50 (us) | 16 clients p99 (us) |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "Failover (leader SIGKILLed until the standby acknowledges a write), 5 trials: ${FAIL[*]} ms."
} >"$OUT"
echo "[ha.sh] wrote $OUT" >&2
