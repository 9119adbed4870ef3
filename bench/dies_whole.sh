#!/bin/bash
# A job that dies whole: N members form a generation (armed: each arms its recovery, as `muster run
# --recovery in-place` does), then every member process is killed with SIGKILL at once, as when a job
# is cancelled or its nodes lose power together.  A probe on its own connection pings musterd every
# millisecond meanwhile (muster-recovery --kill all); the longest ping after the kill is how long every
# other job on that daemon waited while it took the dead job apart.  With a second build (BASE_BUILD,
# e.g. one made from an older commit), both daemons run the same jobs in one run, alternating, with the
# same CPU placement: musterd on CPU 0, the members and the probe on DIES_LOAD_CPUS (default 1).
# Writes bench/results/dies-whole.md and its raw records (dies-whole.jsonl).
#
#   bench/dies_whole.sh [BUILD_DIR] [BASE_BUILD_DIR] [REPS]      (default: build-bench, none, 3)
#   DIES_SIZES="1024 4096" DIES_MODES="armed recover" DIES_LOAD_CPUS=1-15 bench/dies_whole.sh ...
#
# Every step runs under `timeout`.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
BASE=${2:-}
REPS=${3:-3}
SIZES=${DIES_SIZES:-"1024 4096"}
MODES=${DIES_MODES:-"armed recover"}
LOAD_CPUS=${DIES_LOAD_CPUS:-1}
OUT=${DIES_OUT:-$ROOT/bench/results}
RC=$BUILD/bench/muster-recovery
WORK=$(mktemp -d /tmp/muster-dies.XXXXXX)

for b in "$BUILD/store-server/musterd" "$RC" ${BASE:+"$BASE/store-server/musterd"}; do
    [ -x "$b" ] || { echo "dies_whole.sh: $b missing: ninja -C <build> store-server/musterd bench/muster-recovery" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)" || { echo "dies_whole.sh: cannot raise the open file limit" >&2; exit 2; }

# Progress line on stderr.
log() {
    printf '[dies-whole %s] %s\n' "$(date +%T)" "$*" >&2
}

. "$ROOT/bench/solo.sh"

mkdir -p "$OUT"
RAW=$OUT/dies-whole.jsonl
: >"$RAW"
{
    echo "command: bench/dies_whole.sh $*"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "builds: $BUILD${BASE:+ (this), $BASE (base)}"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs"
    echo "placement: musterd on CPU 0, members and probe on CPU(s) $LOAD_CPUS"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/header"
for rep in $(seq "$REPS"); do
    for n in $SIZES; do
        for mode in $MODES; do
            for which in this ${BASE:+base}; do
                b=$BUILD
                [ "$which" = base ] && b=$BASE
                solo_start "$b/store-server/musterd" warn
                out=null
                if [ "$PORT" -gt 0 ]; then
                    out=$(timeout -k 5 180 taskset -c "$LOAD_CPUS" "$RC" --url "tcp://127.0.0.1:$PORT/d$rep-$mode-$n" \
                        --members "$n" --mode "$mode" --kill all --probe-ms 3000 --server-pid "$MPID" 2>>"$WORK/stderr.log" | tail -n 1)
                fi
                solo_stop
                case $out in "{"*) ;; *) out=null ;; esac
                printf '{"rep":%d,"members":%d,"mode":"%s","build":"%s","result":%s}\n' "$rep" "$n" "$mode" "$which" \
                    "$out" >>"$RAW"
                log "rep $rep, $n members, $mode, $which: $(printf '%s' "$out" | grep -o '"\(stall_max_ms\|server_cpu_ms\)":[0-9.-]*' | tr '\n' ' ')"
            done
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/header"
python3 - "$RAW" "$WORK/header" "$OUT/dies-whole.md" <<'EOF'
import json, statistics, sys
raw, header, out = sys.argv[1:]
recs = [json.loads(l) for l in open(raw) if l.strip()]
builds = [b for b in ("this", "base") if any(r["build"] == b for r in recs)]
keys = sorted({(r["members"], r["mode"]) for r in recs})
def med(n, mode, b, key):
    v = [r["result"][key] for r in recs if (r["members"], r["mode"], r["build"]) == (n, mode, b)
         and r["result"] and r["result"]["complete"]]
    return (statistics.median(v), len(v)) if v else (None, 0)
def fmt(x):
    return "n/a" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")
with open(out, "w") as f:
    f.write("# A job that dies whole: how long the other jobs wait\n\n```\n" + open(header).read() + "```\n\n")
    f.write("N members form a generation, then every member process is killed at once (SIGKILL). A probe on "
            "its own connection pings musterd every millisecond for 3 s after the kill. Medians over the "
            "repetitions, in ms: musterd's CPU time in those 3 s (from /proc: taking the dead job apart), "
            "and the probe's longest, 99th-percentile and median ping.\n\n")
    f.write("| members | mode | build | runs | musterd CPU | longest ping | p99 ping | median ping |\n"
            "|---|---|---|---|---:|---:|---:|---:|\n")
    for n, mode in keys:
        for b in builds:
            cpu, runs = med(n, mode, b, "server_cpu_ms")
            f.write(f"| {n} | {mode} | {b} | {runs} | {fmt(cpu)} | {fmt(med(n, mode, b, 'stall_max_ms')[0])} | "
                    f"{fmt(med(n, mode, b, 'stall_p99_ms')[0])} | {fmt(med(n, mode, b, 'ping_p50_ms')[0])} |\n")
    if "base" in builds:
        f.write("\nRatios, base / this (above 1: this build does less):\n\n"
                "| members | mode | musterd CPU | longest ping |\n|---|---|---:|---:|\n")
        for n, mode in keys:
            r = []
            for k in ("server_cpu_ms", "stall_max_ms"):
                a, b = med(n, mode, "this", k)[0], med(n, mode, "base", k)[0]
                r.append("n/a" if not a or b is None else f"{b / a:.1f}")
            f.write(f"| {n} | {mode} | {r[0]} | {r[1]} |\n")
print(open(out).read())
EOF
