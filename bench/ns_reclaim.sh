#!/bin/bash
# Namespace creation rate of one address, and how long the reclamation sweep holds musterd's loop,
# on loopback (bench/results/ns-reclaim.md holds the figures):
#   1. one address creating namespaces (one key each) as fast as it can for CREATE_S seconds, at the
#      defaults (--max-namespace-creates-per-source 600 a minute, --max-namespaces-per-source 1024),
#      then with both limits off (what one address could do before the rate limit);
#   2. FILL namespaces of one key each, left unused until --ns-reclaim-after drops them all, memory
#      only and with --data-dir: the sweep's longest slice (ns_sweep_slice_max_us) and a pinging
#      client's round trips meanwhile.
#
#   bench/ns_reclaim.sh [BUILD_DIR] [FILL] [CREATE_S]     (default: build, 50000, 5; about 3 minutes)
#
# BUILD_DIR needs store-server/musterd and bench/muster-nsreclaim.  Every step runs under `timeout`.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
FILL=${2:-50000}
CREATE_S=${3:-5}
MUSTERD=$BUILD/store-server/musterd
NR=$BUILD/bench/muster-nsreclaim
WORK=$(mktemp -d /tmp/muster-nsreclaim.XXXXXX)
MPID=0

for b in "$MUSTERD" "$NR"; do
    [ -x "$b" ] || { echo "ns_reclaim.sh: $b missing: ninja -C $BUILD store-server/musterd bench/muster-nsreclaim" >&2; exit 2; }
done

# Stop the daemon this script started, by its pid.
stop() {
    if [ "$MPID" -gt 0 ]; then
        kill -TERM "$MPID" 2>/dev/null
        timeout 10 tail --pid="$MPID" -f /dev/null 2>/dev/null || kill -KILL "$MPID" 2>/dev/null
        wait "$MPID" 2>/dev/null
    fi
    MPID=0
}
trap 'stop; rm -rf "$WORK"' EXIT

# Start musterd with extra flags, logging to $WORK/$1.log; sets URL.
start() {
    local name=$1
    shift
    rm -f "$WORK/port"
    "$MUSTERD" --listen 127.0.0.1:0 --port-file "$WORK/port" --log-file "$WORK/$name.log" "$@" &
    MPID=$!
    for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.05; done
    URL="tcp://127.0.0.1:$(cat "$WORK/port")"
}

# The counter $2 from a fresh stats dump into log $1.
stat() {
    local before
    before=$(grep -c "stats end" "$1")
    kill -USR1 "$MPID"
    for _ in $(seq 100); do [ "$(grep -c "stats end" "$1")" -gt "$before" ] && break; sleep 0.02; done
    grep -o "stat $2=[0-9]*" "$1" | tail -1 | cut -d= -f2
}

echo "== creation rate of one address, $CREATE_S s"
start rate-default
timeout 60 "$NR" create "$URL" "$CREATE_S" d | tail -1
echo "limit_namespace_creates_per_source=$(stat "$WORK/rate-default.log" limit_namespace_creates_per_source)" \
     "limit_namespaces_per_source=$(stat "$WORK/rate-default.log" limit_namespaces_per_source)"
stop
start rate-off --max-namespace-creates-per-source 0 --max-namespaces-per-source 1000000
timeout 60 "$NR" create "$URL" "$CREATE_S" u | tail -1
stop

echo "== ping on an idle daemon, 10 s (the noise floor of the round trips below)"
start idle
timeout 30 "$NR" ping "$URL" 10
stop

for mode in memory data-dir; do
    echo "== sweep of $FILL namespaces of one key, $mode"
    extra=()
    [ "$mode" = data-dir ] && extra=(--data-dir "$WORK/data")
    start "sweep-$mode" --max-namespace-creates-per-source 0 --max-namespaces-per-source 1000000 \
        --ns-idle-timeout 0 --ns-reclaim-after 20s "${extra[@]}"
    timeout 120 "$NR" fill "$URL" "$FILL" f
    # The counter is the longest slice so far: here, of passes that only looked (nothing old enough yet).
    look=$(stat "$WORK/sweep-$mode.log" ns_sweep_slice_max_us)
    # A client pinging every millisecond through the pass that drops them all (20 s after the first was
    # made, at the next pass: passes start every 5 s).
    timeout 60 "$NR" ping "$URL" 35 > "$WORK/ping" &
    PING=$!
    wait "$PING"
    echo "dropped=$(stat "$WORK/sweep-$mode.log" namespaces_reclaimed_idle)" \
         "namespaces_left=$(stat "$WORK/sweep-$mode.log" namespaces)" \
         "slice_max_us_looking=$look" \
         "slice_max_us=$(stat "$WORK/sweep-$mode.log" ns_sweep_slice_max_us)"
    grep -h "dropped .* namespaces unused" "$WORK/sweep-$mode.log" | tail -2
    cat "$WORK/ping"
    stop
done
