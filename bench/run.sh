#!/bin/bash
# Every benchmark comparison in one command: builds release binaries, enters a private
# network namespace (only lo), starts musterd, torch 1.13's TCPStore server and
# redis-server pinned to CPU 0, drives them from CPU 1 (and from CPU 0 for the one-CPU
# case), and writes bench/results/{results.json,results.md,plot.png,command.txt}.
#
#   bench/run.sh [--deps] [--missing-ok] [--quick] [--only SECTIONS] [--out DIR] [--profile] [--no-build] [--append]
#
# It first checks for the peers it compares against (redis-server, redis-benchmark and redis-cli;
# torch 1.13 for /usr/bin/python3), matplotlib for the plot and perf for --profile, and stops
# naming each one missing and the command that installs it: scripts/deps.sh --bench, which
# --deps runs first.  --missing-ok runs anyway, the missing peers' rows reading "not measured".
#
# SECTIONS is a comma list of: latency,capacity,storm,rproc,memory,faults (default: all).
# --append adds to the records already in DIR (more repetitions, or a section run again)
# instead of starting afresh; the report then uses every record.
# --quick runs fewer points with smaller counts (minutes, for development); --profile adds
# a perf profile of musterd under load.  Every step runs under `timeout`.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${MUSTER_BENCH_BUILD:-$ROOT/build-bench}
OUT=$HERE/results
ONLY=latency,capacity,storm,rproc,memory,faults
QUICK=0
PROFILE=0
BUILD_IT=1
APPEND=0
DEPS=0
MISSING_OK=0
ARGS=()
USAGE="usage: $0 [--deps] [--missing-ok] [--quick] [--only SECTIONS] [--out DIR] [--profile] [--no-build] [--append]"
while [ $# -gt 0 ]; do
    [ "$1" = --deps ] || ARGS+=("$1")  # the namespace's re-run installs nothing
    case $1 in
        --deps) DEPS=1 ;;
        --missing-ok) MISSING_OK=1 ;;
        --quick) QUICK=1 ;;
        --only) [ $# -ge 2 ] || { echo "$USAGE" >&2; exit 2; }; ONLY=$2; ARGS+=("$2"); shift ;;
        --out) [ $# -ge 2 ] || { echo "$USAGE" >&2; exit 2; }; OUT=$2; ARGS+=("$2"); shift ;;
        --profile) PROFILE=1 ;;
        --no-build) BUILD_IT=0 ;;
        --append) APPEND=1 ;;
        *) echo "$USAGE" >&2; exit 2 ;;
    esac
    shift
done
PY=/usr/bin/python3   # Debian's interpreter: the one that has torch 1.13 and matplotlib
. "$HERE/lib.sh"
. "$HERE/sections.sh"
. "$HERE/faults.sh"

# Outside the namespace: install or check the peers, build, then re-enter this script inside a fresh one.
if [ -z "${MUSTER_BENCH_NETNS:-}" ]; then
    if [ "$DEPS" = 1 ]; then
        bash "$ROOT/scripts/deps.sh" --bench || exit 1
    fi
    bench_preflight || [ "$MISSING_OK" = 1 ] || exit 2
    if [ "$BUILD_IT" = 1 ]; then
        bench_build || exit 1
    fi
    mkdir -p "$OUT"
    exec unshare -n env MUSTER_BENCH_NETNS=1 "$0" "${ARGS[@]}"
fi

bench_netns_setup || exit 1
RUN=$(mktemp -d /tmp/muster-bench.XXXXXX)
RAW=$OUT/raw.jsonl
if [ "$APPEND" = 1 ]; then
    echo >>"$OUT/command.txt"
else
    : >"$RAW"
    : >"$OUT/stderr.log"
    : >"$OUT/command.txt"
fi
trap 'stop_all; rm -rf "$RUN"' EXIT
bench_describe >>"$OUT/command.txt"

start_musterd
start_tcpstore
start_redis
start_floord
for s in ${ONLY//,/ }; do
    log "section $s"
    "section_$s"
done
[ "$PROFILE" = 1 ] && section_profile
stop_all
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/command.txt"
log "report"
timeout 120 "$PY" "$HERE/report.py" "$OUT" || log "report.py failed"
log "done: $OUT/results.md"
