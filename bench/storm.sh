#!/bin/bash
# The storm at job scale: N simulated torch ranks (8 per node) run init_process_group's
# store traffic from one launch time to the NCCL id on every rank, three ways:
#   relay   each node's `muster run` relay (muster-relayhost: up to RELAYS_PER_PROC relays, each
#           its own thread, per process) between the node's ranks and one musterd;
#   direct  every rank straight at musterd's TCPStore listener (one fd per rank in musterd:
#           sizes over MAX_DIRECT are skipped);
#   torch   every rank at torch 1.13's own TCPStore server (a python3 process; same bound).
# Ranks are connections of muster-tsstorm processes (RANKS_PER_GEN each, one epoll set).
# musterd's CPU (from /proc/PID/stat) and connections are measured apart from the relays'
# and the generators'; everything shares this machine's CPUs.  Runs in a private network
# namespace (only lo; wider port range and accept queues), re-executing itself under
# `unshare -n`.  Results: one JSON line per run in OUT/storm.jsonl, the command in
# OUT/storm-command.txt.
#
#   bench/storm.sh [--build DIR] [--no-build] [--sizes 1000,10000,32000,100000]
#                  [--modes relay,direct,torch] [--reps R] [--timeout S] [--out DIR]
#
# --build defaults to build-storm, or to .carry/build (scripts/build-carry.sh) where only that
# exists; --no-build runs the binaries as they are (a machine without the build's toolchain
# or protobuf-c: .carry/lib is put on LD_LIBRARY_PATH when it exists).  torch's server and the
# records are run with STORM_PYTHON, else /usr/bin/python3 when it imports torch, else python3;
# torch 2.x's server gets the VALIDATE era's numbering, torch 1.x the old one.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$ROOT/build-storm
[ ! -d "$BUILD" ] && [ -d "$ROOT/.carry/build" ] && BUILD=$ROOT/.carry/build
NOBUILD=0
SIZES=1000,10000,32000,100000
MODES=relay,direct,torch
REPS=1
TIMEOUT=120
OUT=$HERE/results
ARGS=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD=$(realpath "$2"); shift 2 ;;
    --no-build) NOBUILD=1; shift ;;
    --sizes) SIZES=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$(realpath "$2"); shift 2 ;;
    *) echo "usage: bench/storm.sh [--build DIR] [--no-build] [--sizes N,..] [--modes relay,direct,torch] [--reps R] [--timeout S] [--out DIR]" >&2
       exit 2 ;;
    esac
done
PER_NODE=8
RELAYS_PER_PROC=1250    # 12 fds a relay (listener, upstream, stop pipe, 8 ranks): ~15,000 of 20,000
RANKS_PER_GEN=12500     # one fd a rank
MAX_DIRECT=19000        # the server's fds: one a rank, under the 20,000 limit
MPORT=29600
TSLPORT=29501
TORCHPORT=29502
MUSTERD=$BUILD/store-server/musterd
TSSTORM=$BUILD/bench/muster-tsstorm
RELAYHOST=$BUILD/bench/muster-relayhost
[ -d "$ROOT/.carry/lib" ] && export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=${STORM_PYTHON:-}
if [ -z "$PY" ]; then
    PY=/usr/bin/python3
    "$PY" -c 'import torch' 2>/dev/null || PY=$(command -v python3)
fi
# TCPStore's numbering that torch's own server speaks: old before torch 2 (no VALIDATE), new after.
TORCH_ERA=$("$PY" -c 'import torch; print("old" if int(torch.__version__.split(".")[0]) < 2 else "new")' 2>/dev/null)

if [ -z "${STORM_NETNS:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "storm.sh: needs root for unshare -n" >&2; exit 2; }
    if [ "$NOBUILD" = 0 ]; then
        ninja -C "$BUILD" store-server/musterd bench/muster-tsstorm bench/muster-relayhost >&2 || exit 1
    fi
    for b in "$MUSTERD" "$TSSTORM" "$RELAYHOST"; do
        [ -x "$b" ] || { echo "storm.sh: $b is not built" >&2; exit 2; }
        if ldd "$b" | grep -q 'not found'; then
            echo "storm.sh: $b misses libraries:" >&2
            ldd "$b" | grep 'not found' >&2
            exit 2
        fi
    done
    mkdir -p "$OUT"
    STORM_INVOCATION=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    {
        echo "---"
        echo "command: bench/storm.sh ${ARGS[*]}"
        echo "date (the \"invocation\" of its records): $STORM_INVOCATION"
        echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
        echo "build: $BUILD ($(meson introspect --buildoptions "$BUILD" 2>/dev/null |
            $PY -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="buildtype"][0])' 2>/dev/null))"
        echo "kernel: $(uname -r)"
        echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs"
        echo "open files (hard): $(ulimit -Hn)"
        echo "torch: $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null) ($PY, numbering: ${TORCH_ERA:-none})"
        echo "relay sources: $(cat "$ROOT"/client/launcher/run_relay*.[ch] | sha256sum | cut -c1-16)$(git -C "$ROOT" status --porcelain -- client/launcher |
            grep -q 'run_relay' && echo ' (with changes not committed)')"
        echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >>"$OUT/storm-command.txt"
    STORM_INVOCATION=$STORM_INVOCATION STORM_NETNS=1 exec unshare -n "$0" "${ARGS[@]}"
fi

RUN=$(mktemp -d /tmp/muster-storm.XXXXXX)
RAW=$OUT/storm.jsonl
CLK_TCK=$(getconf CLK_TCK)
PIDS=()
MSTARTS=0
# STORM_KEEP=1 keeps the run's directory (musterd's, the relays' and the generators' logs).
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; [ "${STORM_KEEP:-0}" = 1 ] && echo "storm: kept $RUN" >&2 || rm -rf "$RUN"' EXIT

# Print a message on stderr.
log() { echo "storm: $*" >&2; }

# CPU seconds (user + system) of the processes named by their pids, from /proc/PID/stat.
cpu_of() {
    local t=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
    done
    awk -v t="$t" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t / hz}'
}

# Wait up to $2 seconds for file $1.
wait_file() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        [ -s "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# Sample the open fds of pid $1 every 0.1 s into $2 (the largest count) until $3 exists (at most $4 s).
fd_sampler() {
    local max=0 n i
    for ((i = 0; i < $4 * 10; i++)); do
        [ -e "$3" ] && break
        n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
        ((n > max)) && max=$n
        echo "$max" >"$2"
        sleep 0.1
    done
}

# Bring lo up: with ip where it is installed, else with the SIOCGIFFLAGS / SIOCSIFFLAGS ioctls.
lo_up() {
    if command -v ip >/dev/null; then
        ip link set lo up
        return
    fi
    "$PY" -c 'import fcntl, socket, struct
s = socket.socket()
f = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", f | 1))'
}

# Write sysctl $1 (dotted name) = $2 through /proc/sys, so no sysctl binary is needed.
sysw() { printf '%s\n' "$2" >"/proc/sys/${1//.//}"; }

lo_up || exit 1
sysw net.core.somaxconn 65535 && sysw net.ipv4.tcp_max_syn_backlog 65535 &&
    sysw net.ipv4.ip_local_port_range "1024 65000" &&
    sysw net.ipv4.ip_local_reserved_ports "$TSLPORT,$TORCHPORT,$MPORT" || exit 1
# A process here holds up to about 16,000 fds (a relay host, a generator; 19,500 for musterd at
# MAX_DIRECT): as root a lower hard limit is raised to 20,000, the one the figures were taken under.
[ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt 20000 ] && { ulimit -Hn 20000 || exit 1; }
ulimit -n "$(ulimit -Hn)"

# Some of musterd's counters (pid $1) from a fresh SIGUSR1 dump in its log, as "name=value" words.
mcounters() {
    local before n=600
    before=$(grep -c 'stats end' "$MLOG" 2>/dev/null)
    kill -USR1 "$1" 2>/dev/null || return 0
    while [ "$(grep -c 'stats end' "$MLOG" 2>/dev/null)" -le "$before" ] && [ $n -gt 0 ]; do
        sleep 0.05
        n=$((n - 1))
    done
    tac "$MLOG" | sed -n '/stats end/,/stats begin/p' | awk '/ stat / {sub(/.* stat /, ""); print}' |
        grep -E '^(connections_accepted|tcpstore_connections_accepted|requests|tcpstore_requests|frames_out|bytes_out|events_pushed|watch_events|limit_watch_output|limit_output|waits_parked|op_(add|get|wait|set|hello))=' |
        tr '\n' ' '
}

# Start a fresh musterd (native port and TCPStore listener); sets MPID.
start_musterd() {
    rm -f "$RUN/m.port"
    MLOG=$RUN/musterd.$((++MSTARTS)).log
    "$MUSTERD" --listen "127.0.0.1:$MPORT" --tcpstore-listen "127.0.0.1:$TSLPORT" --port-file "$RUN/m.port" \
        --max-connections 19500 --log-level warn >"$MLOG" 2>&1 &
    MPID=$!
    PIDS+=("$MPID")
    wait_file "$RUN/m.port" 20 || { log "musterd did not start"; tail -n 5 "$MLOG" >&2; return 1; }
}

# Start torch's TCPStore server; sets SPID (the python process).
start_torch() {
    rm -f "$RUN/t.port"
    "$PY" "$HERE/tcpstore_server.py" "$TORCHPORT" --port-file "$RUN/t.port" >>"$RUN/torch.log" 2>&1 &
    SPID=$!
    PIDS+=("$SPID")
    wait_file "$RUN/t.port" 60 || { log "TCPStore server did not start"; tail -n 5 "$RUN/torch.log" >&2; return 1; }
}

# Stop the processes named by pid and wait for them.
stop_all() {
    local p
    for p in "$@"; do kill "$p" 2>/dev/null; done
    for p in "$@"; do wait "$p" 2>/dev/null; done
}

# Start the relays of $1 nodes against musterd (generation $2); sets RPIDS, RSTART_S, writes $RUN/targets.
start_relays() {
    local nodes=$1 gen=$2 procs i k first t0
    procs=$(((nodes + RELAYS_PER_PROC - 1) / RELAYS_PER_PROC))
    RPIDS=()
    rm -f "$RUN"/ports.* "$RUN"/ready.* "$RUN"/relay.*.json
    cat "$RUN/relay.log" >>"$RUN/relay-all.log" 2>/dev/null
    : >"$RUN/relay.log"
    t0=$(date +%s%N)
    for ((i = 0; i < procs; i++)); do
        first=$((i * RELAYS_PER_PROC))
        k=$((nodes - first < RELAYS_PER_PROC ? nodes - first : RELAYS_PER_PROC))
        "$RELAYHOST" --url "tcp://127.0.0.1:$MPORT/storm" --gen "$gen" --count "$k" --ports-file "$RUN/ports.$i" \
            --ready-file "$RUN/ready.$i" --hold $((TIMEOUT + 120)) >"$RUN/relay.$i.json" 2>>"$RUN/relay.log" &
        RPIDS+=($!)
        PIDS+=($!)
    done
    for ((i = 0; i < procs; i++)); do
        wait_file "$RUN/ready.$i" 120 || { log "relay host $i did not start"; tail -n 3 "$RUN/relay.log" >&2; return 1; }
    done
    RSTART_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
    for ((i = 0; i < procs; i++)); do cat "$RUN/ports.$i"; done >"$RUN/targets"
}

# Run the generators for N ranks at the target (--targets FILE or --connect HOST:PORT) with era $4;
# server pids in $5 (musterd or torch's), relay pids in $6; prints the JSON record.
storm_once() {
    local mode=$1 n=$2 target=$3 era=$4 spids=$5 rpids=$6 gens i first k start cpu_s0 cpu_r0 cpu_s1 cpu_r1
    gens=$(((n + RANKS_PER_GEN - 1) / RANKS_PER_GEN))
    rm -f "$RUN"/gen.*.json "$RUN/fd.stop" "$RUN/fd.max"
    # shellcheck disable=SC2086
    cpu_s0=$(cpu_of $spids)
    # shellcheck disable=SC2086
    cpu_r0=$(cpu_of $rpids)
    fd_sampler "${spids%% *}" "$RUN/fd.max" "$RUN/fd.stop" $((TIMEOUT + 30)) &
    local sampler=$!
    start=$(($(date +%s%N) + 300000000 + gens * 50000000))
    local gpids=()
    for ((i = 0; i < gens; i++)); do
        first=$(((n * i) / gens))
        k=$(((n * (i + 1)) / gens - first))
        # shellcheck disable=SC2086
        timeout $((TIMEOUT + 30)) "$TSSTORM" $target --world "$n" --first "$first" --count "$k" --per-node "$PER_NODE" \
            --era "$era" --start-at "$start" --timeout "$TIMEOUT" >"$RUN/gen.$i.json" 2>>"$RUN/gen.log" &
        gpids+=($!)
    done
    for i in "${gpids[@]}"; do wait "$i"; done
    # shellcheck disable=SC2086
    cpu_s1=$(cpu_of $spids)
    # shellcheck disable=SC2086
    cpu_r1=$(cpu_of $rpids)
    local counters=
    [ "$mode" != torch ] && counters=$(mcounters "${spids%% *}")
    touch "$RUN/fd.stop"
    wait "$sampler"
    cat "$RUN"/gen.*.json | "$PY" -c '
import json, os, sys
mode, n, nodes, s0, s1, r0, r1, fds, rstart, counters = sys.argv[1:11]
g = [json.loads(l) for l in sys.stdin if l.startswith("{")]
start = min(x["start_at"] for x in g) if g else 0
done = sum(x["done"] for x in g)
last = max(x["t_id_last"] for x in g) if g else 0
mx = lambda k: max((x[k] for x in g), default=-1)
print(json.dumps({"invocation": os.environ.get("STORM_INVOCATION", ""), "mode": mode, "ranks": int(n), "nodes": int(nodes), "generators": len(g),
  "done": done, "failed": sum(x["failed"] for x in g), "unfinished": sum(x["unfinished"] for x in g),
  "retries": sum(x["retries"] for x in g),
  "launch_to_last_id_ms": round((last - start) / 1e6, 1) if done == int(n) else None,
  "handshake_last_ms": mx("hs_last_ms"), "init_add_last_ms": mx("init_last_ms"),
  "barrier_last_ms": mx("barrier_last_ms"),
  "past_handshake": sum(x["n_hs"] for x in g), "past_init_add": sum(x["n_init"] for x in g),
  "past_barrier": sum(x["n_bar"] for x in g), "id_p99_ms_worst_gen": mx("id_p99_ms"),
  "server_cpu_s": round(float(s1) - float(s0), 2), "relays_cpu_s": round(float(r1) - float(r0), 2),
  "generators_cpu_s": round(sum(x["cpu_s"] for x in g), 2), "server_fds_max": int(fds or 0),
  "relay_start_s": float(rstart) if rstart != "-" else None,
  "why": next((x["why"] for x in g if x["why"]), ""),
  "musterd": {k: int(v) for k, v in (w.split("=") for w in counters.split())}}))
' "$mode" "$n" $((n / PER_NODE)) "$cpu_s0" "$cpu_s1" "$cpu_r0" "$cpu_r1" "$(cat "$RUN/fd.max" 2>/dev/null)" "${RSTART_S:--}" "$counters"
}

# One run of mode $1 at $2 ranks, appended to RAW (a skip line when it cannot fit).
run_one() {
    local mode=$1 n=$2 rec
    if [ "$mode" != relay ] && [ "$n" -gt "$MAX_DIRECT" ]; then
        printf '{"invocation":"%s","mode":"%s","ranks":%d,"skipped":"one fd per rank in the server: %d ranks cannot fit under the %d open files a process may hold"}\n' \
            "${STORM_INVOCATION:-}" "$mode" "$n" "$n" "$(ulimit -Hn)" | tee -a "$RAW"
        return
    fi
    RSTART_S=
    case "$mode" in
    relay)
        start_musterd || return
        start_relays $((n / PER_NODE)) 1 || { stop_all "${RPIDS[@]}" "$MPID"; return; }
        rec=$(storm_once relay "$n" "--targets $RUN/targets" new "$MPID" "${RPIDS[*]}")
        stop_all "${RPIDS[@]}"
        rec=$(cat "$RUN"/relay.*.json | "$PY" -c '
import collections, json, re, sys
rec = json.loads(sys.argv[1])
rs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
for k in ("accepted", "requests", "parked", "upstream_errors", "limit_conns", "request_timeout"):
    rec["relay_" + k] = sum(r[k] for r in rs)
rec["relay_hosts"] = len(rs)
# What the relays said on stderr, numbers taken out, with how many said it (the 5 commonest).
with open(sys.argv[2], errors="replace") as f:
    said = collections.Counter(re.sub(r"[0-9]+", "N", l.strip()) for l in f)
rec["relay_messages"] = dict(said.most_common(5))
print(json.dumps(rec))' "$rec" "$RUN/relay.log")
        stop_all "$MPID" ;;
    direct)
        start_musterd || return
        rec=$(storm_once direct "$n" "--connect 127.0.0.1:$TSLPORT" new "$MPID" "")
        stop_all "$MPID" ;;
    torch)
        start_torch || return
        rec=$(storm_once torch "$n" "--connect 127.0.0.1:$TORCHPORT" "${TORCH_ERA:-old}" "$SPID" "")
        stop_all "$SPID" ;;
    esac
    echo "$rec" | tee -a "$RAW"
}

for n in ${SIZES//,/ }; do
    for mode in ${MODES//,/ }; do
        for ((r = 0; r < REPS; r++)); do
            run_one "$mode" "$n"
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/storm-command.txt"
[ -s "$RUN/gen.log" ] && { log "generator messages:"; sort "$RUN/gen.log" | uniq -c | sort -rn | head -n 5 >&2; }
cat "$RUN/relay.log" >>"$RUN/relay-all.log" 2>/dev/null
[ -s "$RUN/relay-all.log" ] && { log "relay messages:"; sed 's/[0-9]\+/N/g' "$RUN/relay-all.log" | sort | uniq -c | sort -rn | head -n 5 >&2; }
exit 0
