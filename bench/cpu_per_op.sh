#!/bin/bash
# Ops per server CPU-second at 128 clients, in one run: musterd's native get and add, the same
# ops through musterd's TCPStore listener (the door), torch's own TCPStore server (libuv under
# torch 2.x, the old server under 1.x) and muster-floord (one read and one write per request,
# the floor any single-threaded server is bounded by); and, where it was built (liburing),
# muster-floord-uring, the same floor with its system calls batched through io_uring.  Every
# server runs alone on CPU 0; the load is spread over CPUs 1..K (K load generators of 128/K
# connections each).  The server's CPU
# time is read from /proc/PID/stat around each measurement; the load generators' request counts
# are summed.  Prints a markdown table on stdout (progress on stderr), raw JSON lines to --out.
#
#   bench/cpu_per_op.sh [--build DIR] [--python PY] [--seconds S] [--reps R] [--clients N]
#                       [--load-cpus K] [--out FILE]
#
# DIR is a built tree (default build-bench, else .carry/build as scripts/build-carry.sh makes it,
# whose .carry/lib is put on LD_LIBRARY_PATH, for a machine without protobuf-c).  PY is the
# interpreter whose torch serves TCPStore (default python3; none when it has no torch).  Needs
# root for `unshare -n` (a private network namespace: torch's server binds the wildcard address).
# Bounded: each measurement S seconds (3) under `timeout`, R repetitions (2), about
# 7 * R * (S + 2) seconds in all.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=""
PY=python3
SECS=3
REPS=2
CLIENTS=128
K=0
OUTF=/dev/null
USAGE="usage: $0 [--build DIR] [--python PY] [--seconds S] [--reps R] [--clients N] [--load-cpus K] [--out FILE]"
ARGS=("$@")
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { echo "$USAGE" >&2; exit 2; }
    case $1 in
        --build) BUILD=$2 ;;
        --python) PY=$2 ;;
        --seconds) SECS=$2 ;;
        --reps) REPS=$2 ;;
        --clients) CLIENTS=$2 ;;
        --load-cpus) K=$2 ;;
        --out) OUTF=$2 ;;
        *) echo "$USAGE" >&2; exit 2 ;;
    esac
    shift 2
done
if [ -z "$BUILD" ]; then
    BUILD=$ROOT/build-bench
    [ -x "$BUILD/bench/muster-loadgen" ] || BUILD=$ROOT/.carry/build
fi
[ -d "$ROOT/.carry/lib" ] && export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MUSTERD=$BUILD/store-server/musterd
LG=$BUILD/bench/muster-loadgen
FLOORD=$BUILD/bench/muster-floord
FLOORU=$BUILD/bench/muster-floord-uring
for f in "$MUSTERD" "$LG" "$FLOORD"; do
    [ -x "$f" ] || { echo "missing $f: build it (ninja -C DIR store-server/musterd bench/muster-loadgen bench/muster-floord)" >&2; exit 2; }
done

# Re-enter in a private network namespace whose only interface is lo.
if [ -z "${MUSTER_CPO_NETNS:-}" ]; then
    exec unshare -n env MUSTER_CPO_NETNS=1 "$0" "${ARGS[@]}"
fi
# Bring lo up (with iproute2, or through the ioctl where the machine lacks it) and lift the accept queue.
lo_up() {
    ip link set lo up 2>/dev/null && return 0
    "${PYLO:-python3}" -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sH14s", b"lo", 0, bytes(14)))  # SIOCGIFFLAGS
flags = struct.unpack("16sH14s", ifr)[1] | 1                                  # IFF_UP
fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags, bytes(14)))      # SIOCSIFFLAGS
'
}
PYLO=$PY lo_up || { echo "cannot bring lo up in the namespace" >&2; exit 1; }
echo 65535 >/proc/sys/net/core/somaxconn 2>/dev/null
echo "1024 65000" >/proc/sys/net/ipv4/ip_local_port_range 2>/dev/null

NCPU=$(nproc)
if [ "$K" = 0 ]; then
    K=$((NCPU - 1 < 6 ? NCPU - 1 : 6))
    [ "$K" -ge 1 ] || K=1
fi
SRV_CPU=0
RUN=$(mktemp -d /tmp/muster-cpo.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$RUN"' EXIT

# Progress line on stderr.
log() {
    printf '[cpu_per_op %s] %s\n' "$(date +%T)" "$*" >&2
}

# Wait (bounded, tenths of a second) until a file is not empty.
wait_file() {
    local n=$(($2 * 10))
    while [ ! -s "$1" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
    [ -s "$1" ]
}

# CPU ticks (user + system, all threads) of a process.
ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# The load CPU of load generator i (1..K): CPUs 1..NCPU-1 in turn, CPU 0 on a one-CPU machine.
load_cpu() {
    [ "$NCPU" -gt 1 ] && echo $((1 + ($1 - 1) % (NCPU - 1))) || echo 0
}

# Measure one server: cpo NAME PID PORT PROTO OP; appends "NAME OP OPS CPU_S" to $RUN/rows.
cpo() {
    local name=$1 pid=$2 port=$3 proto=$4 op=$5 i per t0 t1 ok=0 n cpu lgp=()
    per=$((CLIENTS / K))
    t0=$(ticks "$pid")
    for i in $(seq "$K"); do
        n=$per
        [ "$i" = "$K" ] && n=$((CLIENTS - per * (K - 1)))
        timeout -k 5 $((SECS + 30)) taskset -c "$(load_cpu "$i")" "$LG" --port "$port" --proto "$proto" --op "$op" \
            --conns "$n" --requests 100000000 --duration "$SECS" --timeout $((SECS + 20)) \
            --key-prefix "/cpo-$op-$i/" >"$RUN/lg.$i" 2>>"$RUN/stderr" &
        lgp+=($!)
    done
    wait "${lgp[@]}"
    t1=$(ticks "$pid")
    local errs=0 e
    for i in $(seq "$K"); do
        n=$(grep -o '"ok":[0-9]*' "$RUN/lg.$i" | head -n 1 | cut -d: -f2)
        e=$(grep -o '"errors":[0-9]*' "$RUN/lg.$i" | head -n 1 | cut -d: -f2)
        ok=$((ok + ${n:-0}))
        errs=$((errs + ${e:-1}))
        printf '{"server":"%s","op":"%s","part":%d,"result":%s}\n' "$name" "$op" "$i" "$(tail -n 1 "$RUN/lg.$i")" >>"$OUTF"
    done
    cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.3f", (b - a) / hz}')
    # A measurement in which a load generator saw errors (unanswered requests: its connections idle)
    # is not the server's figure at 128 clients: it is left out of the table.
    [ "$errs" = 0 ] && echo "$name $op $ok $cpu" >>"$RUN/rows"
    log "$name $op: $ok ops, server CPU ${cpu} s$([ "$errs" = 0 ] || echo ", $errs load generator error(s): left out")"
}

# Start musterd (native and TCPStore listener) on the server CPU.
start_musterd() {
    taskset -c $SRV_CPU "$MUSTERD" --listen 127.0.0.1:29600 --tcpstore-listen 127.0.0.1:29501 \
        --port-file "$RUN/m.port" --max-connections 19000 --log-level warn >"$RUN/musterd.log" 2>&1 &
    MPID=$!
    PIDS+=("$MPID")
    wait_file "$RUN/m.port" 30 || { log "musterd did not start"; tail -n 5 "$RUN/musterd.log" >&2; exit 1; }
}

# Start torch's TCPStore server on the server CPU when PY has torch; TPID 0 otherwise.
start_torch() {
    TPID=0
    TORCH=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || { log "no torch for $PY: its rows are skipped"; return; }
    taskset -c $SRV_CPU "$PY" "$HERE/tcpstore_server.py" 29500 --port-file "$RUN/t.port" >"$RUN/torch.log" 2>&1 &
    TPID=$!
    PIDS+=("$TPID")
    wait_file "$RUN/t.port" 60 || { log "TCPStore server did not start"; tail -n 5 "$RUN/torch.log" >&2; TPID=0; }
    TBACKEND=$(awk '/^backend:/ {print $2}' "$RUN/torch.log")
}

# Start muster-floord on the server CPU.
start_floord() {
    taskset -c $SRV_CPU "$FLOORD" --port-file "$RUN/f.port" 2>>"$RUN/stderr" &
    FPID=$!
    PIDS+=("$FPID")
    wait_file "$RUN/f.port" 10 || { log "muster-floord did not start"; exit 1; }
    FPORT=$(cat "$RUN/f.port")
}

# Start muster-floord-uring on the server CPU where it was built; FUPID 0 otherwise (or when io_uring is off).
start_floord_uring() {
    FUPID=0
    [ -x "$FLOORU" ] || { log "no $FLOORU (built only with liburing): its rows are skipped"; return; }
    taskset -c $SRV_CPU "$FLOORU" --port-file "$RUN/fu.port" 2>>"$RUN/stderr" &
    FUPID=$!
    PIDS+=("$FUPID")
    wait_file "$RUN/fu.port" 10 || { log "muster-floord-uring did not start (io_uring off?)"; FUPID=0; return; }
    FUPORT=$(cat "$RUN/fu.port")
}

# The markdown table: per server and op, the best repetition's ops per server CPU-second, and ratios.
report() {
    awk -v torch="${TORCH:-none} ${TBACKEND:-}" '
        { k = $1 " " $2; r = ($4 > 0) ? $3 / $4 : 0; if (r > best[k]) best[k] = r; if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
        END {
            print "| server | op | ops per server CPU-second (best of reps) |"
            print "|---|---|---:|"
            for (i = 0; i < n; i++) { split(order[i], a, " "); printf "| %s | %s | %.0f |\n", a[1], a[2], best[order[i]] }
            print ""
            print "| ratio | get | add |"
            print "|---|---:|---:|"
            nq = split("native/torch door/torch native/door native/floor floor/torch floor-uring/torch floor-uring/floor", q, " ")
            for (j = 1; j <= nq; j++) {
                split(q[j], s, "/"); line = "| " q[j]
                for (o = 0; o < 2; o++) { op = o ? "add" : "get"; x = best[s[1] " " op]; y = best[s[2] " " op]
                    if (s[2] == "floor") y = best["floor get"]
                    line = line (x > 0 && y > 0 ? sprintf(" | %.2f", x / y) : " | -") }
                print line " |"
            }
            print ""
            print "torch: " torch
        }' "$RUN/rows"
}

log "build $BUILD; $NCPU CPUs: server on CPU $SRV_CPU, load on $K generator(s) over CPUs $(load_cpu 1)..$(load_cpu "$K"); $CLIENTS clients; ${SECS}s x $REPS"
start_musterd
start_floord
start_floord_uring
start_torch
for rep in $(seq "$REPS"); do
    for op in get add; do
        cpo native "$MPID" 29600 native "$op"
        cpo door "$MPID" 29501 tcpstore-new "$op"
        [ "$TPID" -gt 0 ] && cpo torch "$TPID" 29500 tcpstore "$op"
    done
    cpo floor "$FPID" "$FPORT" native get
    [ "$FUPID" -gt 0 ] && cpo floor-uring "$FUPID" "$FUPORT" native get
done
echo "## ops per server CPU-second, $CLIENTS clients ($(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo))"
echo
report
echo "command: bench/cpu_per_op.sh ${ARGS[*]}; git $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
