#!/bin/bash
# The relay of `muster run`, side by side in one run: W clients (muster-relaybench: one thread and
# one TCPStore connection each, ADD after ADD as torch's client does) through today's relay (NEW
# build), through the relay before the asynchronous rebuild (OLD_COMMIT, built from git history
# into a separate directory), and straight at musterd's TCPStore listener, for 1, 8 and 64 clients,
# every client on one key (what the relay combines) and each on a key of its own.  musterd runs on
# CPU 0 and the clients on CPU 1 throughout; the launcher hosting the relay runs once on CPU 0 (with
# musterd: "store"), once on CPU 1 (with the clients: "workers") and, with 3 CPUs or more, once on
# CPU 2 (a CPU of its own: "own").  Writes bench/results/relay.md
# (medians over REPS) and the raw records to bench/results/relay.jsonl.
#
#   bench/relay.sh [NEW_BUILD] [OLD_COMMIT] [REPS]   (default: build-relay, the relay's last
#                                                     synchronous commit, 3; about five minutes)
#
# NEW_BUILD needs store-server/musterd, client/cli/muster and bench/muster-relaybench: ninja -C
# NEW_BUILD store-server/musterd client/cli/muster bench/muster-relaybench.  The old CLI is built
# in $RELAY_OLD_DIR (default /tmp/muster-relay-old-COMMIT) once.  Every step runs under `timeout`.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEW=${1:-$ROOT/build-relay}
OLD_COMMIT=${2:-$(git -C "$ROOT" log -1 --format=%h --grep="relay on libmuster's asynchronous calls")^}
REPS=${3:-3}
SECS=${RELAY_SECONDS:-3}
WORKERS=${RELAY_WORKERS:-"1 8 64"}
# Without a repository (a copy of the tree elsewhere), RELAY_OLD_DIR must hold the old CLI already.
OLD_COMMIT=$(git -C "$ROOT" rev-parse --short "$OLD_COMMIT" 2>/dev/null || echo "$OLD_COMMIT")
OLDDIR=${RELAY_OLD_DIR:-/tmp/muster-relay-old-$OLD_COMMIT}
MUSTERD=$NEW/store-server/musterd
CLI_NEW=$NEW/client/cli/muster
CLI_OLD=$OLDDIR/build/client/cli/muster
RB=$NEW/bench/muster-relaybench
OUT=$ROOT/bench/results
RAW=$OUT/relay.jsonl
WORK=$(mktemp -d /tmp/muster-relaybench.XXXXXX)
MPID=0

for b in "$MUSTERD" "$CLI_NEW" "$RB"; do
    [ -x "$b" ] || { echo "relay.sh: $b missing: ninja -C $NEW store-server/musterd client/cli/muster bench/muster-relaybench" >&2; exit 2; }
done

# Progress line on stderr.
log() {
    printf '[relay %s] %s\n' "$(date +%T)" "$*" >&2
}

# Stop musterd and remove the scratch directory.
cleanup() {
    [ "$MPID" -gt 0 ] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# The CLI of OLD_COMMIT, built once from `git archive` (no work tree of the repository is touched).
if [ ! -x "$CLI_OLD" ]; then
    log "building the relay of $OLD_COMMIT in $OLDDIR"
    rm -rf "$OLDDIR" && mkdir -p "$OLDDIR/src" || exit 1
    git -C "$ROOT" archive "$OLD_COMMIT" | tar -x -C "$OLDDIR/src" || exit 1
    timeout 300 meson setup "$OLDDIR/build" "$OLDDIR/src" >"$OLDDIR/setup.log" 2>&1 &&
        timeout 900 ninja -C "$OLDDIR/build" client/cli/muster >"$OLDDIR/build.log" 2>&1 ||
        { echo "relay.sh: building $OLD_COMMIT failed: see $OLDDIR" >&2; exit 1; }
fi

# Start musterd on CPU 0 with its TCPStore listener; sets PORT and TPORT.
taskset -c 0 "$MUSTERD" --listen 127.0.0.1:0 --port-file "$WORK/port" --tcpstore-listen 127.0.0.1:0 \
    --tcpstore-port-file "$WORK/tport" --log-level warn >>"$WORK/musterd.log" 2>&1 &
MPID=$!
for _ in $(seq 100); do
    [ -s "$WORK/port" ] && [ -s "$WORK/tport" ] && break
    sleep 0.05
done
PORT=$(cat "$WORK/port" 2>/dev/null || echo 0)
TPORT=$(cat "$WORK/tport" 2>/dev/null || echo 0)
[ "$PORT" -gt 0 ] && [ "$TPORT" -gt 0 ] || { log "musterd did not start"; tail -n 5 "$WORK/musterd.log" >&2; exit 1; }

# One measurement: target (direct, new/store, old/store, new/workers, old/workers), clients, key mode,
# repetition; appends a record to RAW.  The clients are on CPU 1 in every case.
measure() {
    local target=$1 w=$2 key=$3 rep=$4 line
    local args=(--workers "$w" --seconds "$SECS" --key "$key" --label "$target" --cpu 1)
    case $target in
    direct) line=$(taskset -c 1 timeout 60 "$RB" --port "$TPORT" "${args[@]}") ;;
    *)
        local cli=$CLI_NEW cpu=0
        [ "${target%/*}" = old ] && cli=$CLI_OLD
        [ "${target#*/}" = workers ] && cpu=1
        [ "${target#*/}" = own ] && cpu=2
        line=$(taskset -c "$cpu" timeout 60 "$cli" run --url "tcp://127.0.0.1:$PORT/rb-${target%/*}-$cpu-$w-$key-$rep" \
            --nproc-per-node 1 --max-restarts 0 "$RB" "${args[@]}" 2>>"$WORK/launcher.log" | grep '^{') ;;
    esac
    [ -n "$line" ] || { log "$target $w $key: no result"; return; }
    echo "${line%\}},\"rep\":$rep}" >>"$RAW"
    log "$line"
}

TARGETS="direct new/store old/store new/workers old/workers"
[ "$(nproc)" -ge 3 ] && TARGETS="$TARGETS new/own old/own"
mkdir -p "$OUT"
: >"$RAW"
HEADER="command: RELAY_SECONDS=$SECS RELAY_WORKERS=\"$WORKERS\" bench/relay.sh $*
date: $(date -u +%Y-%m-%dT%H:%M:%SZ)
git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown); old relay: $OLD_COMMIT
binaries: $NEW (buildtype $(meson introspect --buildoptions "$NEW" 2>/dev/null | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="buildtype"][0])' 2>/dev/null || echo ?)), old: $OLDDIR/build
cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs; musterd on CPU 0, clients on CPU 1, the launcher on CPU 0, 1 or 2
load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# Interleaved: each repetition runs every target once per setting, so a slow moment hits all alike.
for rep in $(seq "$REPS"); do
    for w in $WORKERS; do
        for key in same own; do
            for target in $TARGETS; do
                measure "$target" "$w" "$key" "$rep"
            done
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/footer"
python3 - "$RAW" "$OUT/relay.md" "$HEADER" "$(cat "$WORK/footer")" "$SECS" <<'PY'
import json, statistics, sys
raw, md, header, footer, secs = sys.argv[1:6]
recs = [json.loads(l) for l in open(raw) if l.strip()]
def med(label, w, key, f):
    v = [r[f] for r in recs if r["label"] == label and r["workers"] == w and r["key"] == key]
    return statistics.median(v) if v else float("nan")
L = ["# The relay of `muster run`: pipelined and combining, against the relay before it and musterd's listener", "",
     "```", header, footer, "```", "",
     f"muster-relaybench: W client threads on CPU 1, one TCPStore connection each, ADD 1 after ADD 1 (one in flight "
     f"per client, as torch's client), {secs} s timed after 0.5 s of warm-up; medians over the repetitions.  *direct*: "
     "straight at musterd's TCPStore listener; *new*: through today's relay (`muster run --nproc-per-node 1`, the "
     "clients in its worker); *old*: the same through the relay before the asynchronous rebuild.  key *same*: every "
     "client adds to one key (what the relay combines); *own*: each to its own (pipelining alone).  musterd is on "
     "CPU 0 in every row; the launcher, and so the relay's thread, is on CPU 0 beside musterd (*store*) or on "
     "CPU 1 beside the clients (*workers*), or, with 3 CPUs or more, on CPU 2 alone (*own*)."]
for place, what in (("store", "the relay on musterd's CPU (CPU 0), clients on CPU 1"),
                     ("workers", "the relay on the clients' CPU (CPU 1), musterd on CPU 0"),
                     ("own", "the relay on a CPU of its own (CPU 2), musterd on CPU 0, clients on CPU 1")):
    if not any(r["label"] == "new/" + place for r in recs):
        continue
    L += ["", f"## {what}", "",
          "| clients | key | direct req/s | new req/s | old req/s | new/direct | new/old | direct p50 µs | new p50 µs | old p50 µs | new/direct p50 | direct p99 µs | new p99 µs | old p99 µs |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w in sorted({r["workers"] for r in recs}):
        for key in ("same", "own"):
            n_, o_ = "new/" + place, "old/" + place
            d, n, o = (med(x, w, key, "rps") for x in ("direct", n_, o_))
            dp, np_, op = (med(x, w, key, "p50_us") for x in ("direct", n_, o_))
            d99, n99, o99 = (med(x, w, key, "p99_us") for x in ("direct", n_, o_))
            L.append(f"| {w} | {key} | {d:,.0f} | {n:,.0f} | {o:,.0f} | {n/d:.2f} | {n/o:.2f} | {dp:.0f} | {np_:.0f} | "
                     f"{op:.0f} | {np_/dp:.2f} | {d99:.0f} | {n99:.0f} | {o99:.0f} |")
open(md, "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
