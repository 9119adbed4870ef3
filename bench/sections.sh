# The measurement sections of bench/run.sh (sourced after lib.sh).  Each section appends
# JSON lines to $RAW through rec(); report.py turns them into tables and a plot.
# Placement everywhere: servers on CPU 0; the load on CPU 1, or on CPU 0 for "1cpu".

if [ "$QUICK" = 1 ]; then
    REPS=1 LAT_N=5000 CAP_D=1 CAP_CLIENTS="1 32 128" STORM_NS="1000 4000" STORM_REPS=1
    RPROC_NS="8 32" IDLE_N=2000 MEM_KEYS="100000"
else
    REPS=3 LAT_N=20000 CAP_D=3 CAP_CLIENTS="1 8 32 128 512" STORM_NS="1000 4000 10000 16000" STORM_REPS=3
    RPROC_NS="8 32 128 512" IDLE_N=10000 MEM_KEYS="100000 1000000"
fi

# Loopback source addresses for the load generator.  One is enough here: the namespace's
# ephemeral range is 1024-65000 and closed connections leave no TIME_WAIT (the load
# generator resets them), so 16k connections fit; raise it for more.
SOURCES=${SOURCES:-1}

# Tags JSON fragment: tags KEY VALUE ... (values that look like numbers stay numbers).
tags() {
    local s="" sep=""
    while [ $# -ge 2 ]; do
        case $2 in
            ''|*[!0-9.]*) s="$s$sep\"$1\":\"$2\"" ;;
            *) s="$s$sep\"$1\":$2" ;;
        esac
        sep=,
        shift 2
    done
    printf '%s' "$s"
}

# The CPU the load runs on for a placement.
load_cpu() {
    [ "$1" = 1cpu ] && echo 0 || echo 1
}

# One load-generator run against one server: lgrun SECTION PLACEMENT SERVER OP CONNS LIMIT_S ARGS...
lgrun() {
    local sec=$1 pl=$2 srv=$3 op=$4 conns=$5 lim=$6 port proto pid
    shift 6
    case $srv in
        musterd) port=$MPORT proto=native pid=$MPID ;;
        floord) port=$FPORT proto=native pid=$FPID ;;
        musterd-tcpstore) port=$TSLPORT proto=tcpstore-new pid=$MPID ;;
        tcpstore) port=$TSPORT proto=tcpstore-old pid=$TPID ;;
    esac
    rec "$sec" "$(tags server "$srv" placement "$pl" op "$op" conns "$conns" rep "${REP:-1}")" "$lim" \
        taskset -c "$(load_cpu "$pl")" "$LG" --port "$port" --proto "$proto" --op "$op" --conns "$conns" \
        --server-pid "$pid" "$@"
}

# Servers the load generator can drive (musterd's TCPStore listener only when present).
lg_servers() {
    if [ "$HAVE_TSL" = 1 ]; then echo musterd musterd-tcpstore tcpstore; else echo musterd tcpstore; fi
}

# Single client, one request in flight: the ping-pong floor and every server, both placements.
section_latency() {
    local pl rep op srv t
    for pl in 1cpu 2cpu; do
        for rep in $(seq "$REPS"); do
            REP=$rep
            # 33/84 bytes: a native get of a 64-byte value, request and reply frames.
            rec latency "$(tags server floor placement "$pl" op pingpong conns 1 rep "$rep")" 60 \
                "$PP" --cpu-server 0 --cpu-client "$(load_cpu "$pl")" --iters "$LAT_N" --req 33 --resp 84
            for srv in $(lg_servers); do
                for op in get add set; do
                    # TCPStore's set has no reply, so it cannot be timed as a round trip.
                    [ "$op" = set ] && [ "$srv" != musterd ] && continue
                    lgrun latency "$pl" "$srv" "$op" 1 60 --requests "$LAT_N" --duration 30
                done
            done
            for t in get incr set; do
                rec latency "$(tags server redis placement "$pl" op "$t" conns 1 rep "$rep")" 120 \
                    "$PY" "$HERE/redisbench.py" --port "$RPORT" --test "$t" --clients 1 --requests "$LAT_N" \
                    --cpu "$(load_cpu "$pl")" --server-pid "$RPID"
            done
        done
    done
    REP=1
}

# Capacity: clients 1..512 closed-loop on CPU 1 against each server on CPU 0, and the
# one-CPU case at 128 clients; ops/s and ops per server CPU-second.
section_capacity() {
    local op c srv rn rop pl rep
    for rep in $(seq $((REPS > 1 ? 2 : 1))); do
        REP=$rep
        for op in get add; do
            for c in $CAP_CLIENTS; do
                for srv in floord $(lg_servers); do
                    lgrun capacity 2cpu "$srv" "$op" "$c" 90 --requests 5000000 --duration "$CAP_D" --sources "$SOURCES"
                    settle
                done
                rop=$op
                [ "$op" = add ] && rop=incr
                rn=$((c == 1 ? 20000 : 200000))
                [ "$QUICK" = 1 ] && rn=$((rn / 4))
                rec capacity "$(tags server redis placement 2cpu op "$rop" conns "$c" rep "$rep")" 120 \
                    "$PY" "$HERE/redisbench.py" --port "$RPORT" --test "$rop" --clients "$c" --requests "$rn" \
                    --cpu 1 --server-pid "$RPID"
                settle
            done
        done
        pl=1cpu
        for srv in floord $(lg_servers); do
            lgrun capacity "$pl" "$srv" get 128 90 --requests 5000000 --duration "$CAP_D"
            settle
        done
        rec capacity "$(tags server redis placement "$pl" op get conns 128 rep "$rep")" 120 \
            "$PY" "$HERE/redisbench.py" --port "$RPORT" --test get --clients 128 --requests 100000 \
            --cpu 0 --server-pid "$RPID"
    done
    REP=1
}

# Native joins above this many ranks are skipped (none by default: a join that does not ask
# for the member list gets only its own place, so the replies no longer grow as N^2).
STORM_JOIN_MAX=${STORM_JOIN_MAX:-1000000}

# Rendezvous storm: N simulated ranks from one process connect at once, pass a barrier and
# fetch a 128-byte id; native barrier and join, the TCPStore listener, TCPStore itself, and
# (from 10k ranks) the floor server.
section_storm() {
    local n rep srv reps
    for n in $STORM_NS; do
        for rep in $(seq "$STORM_REPS"); do
            rec storm "$(tags server musterd op barrier conns "$n" rep "$rep")" 90 \
                taskset -c 1 "$LG" --port "$MPORT" --mode storm --op barrier --conns "$n" --sources "$SOURCES" \
                --timeout 60 --server-pid "$MPID"
            settle
            if [ "$n" -le "$STORM_JOIN_MAX" ]; then
                rec storm "$(tags server musterd op join conns "$n" rep "$rep")" 90 \
                    taskset -c 1 "$LG" --port "$MPORT" --mode storm --op join --conns "$n" --sources "$SOURCES" \
                    --timeout 60 --server-pid "$MPID"
                settle
            elif [ "$rep" = 1 ]; then
                printf '{"section":"storm",%s,"rc":0,"result":null,"skipped":"above STORM_JOIN_MAX"}\n' \
                    "$(tags server musterd op join conns "$n")" >>"$RAW"
            fi
            if [ "$HAVE_TSL" = 1 ]; then
                rec storm "$(tags server musterd-tcpstore op add+wait+get conns "$n" rep "$rep")" 90 \
                    taskset -c 1 "$LG" --port "$TSLPORT" --proto tcpstore-new --mode storm --conns "$n" \
                    --sources "$SOURCES" --timeout 60 --server-pid "$MPID"
                settle
            fi
        done
        # The floor server answers every step at once (no barrier logic, canned values): the
        # same exchanges through the same kernel, the least any server can take.
        if [ "$n" -ge 10000 ]; then
            rec storm "$(tags server floord op barrier conns "$n" rep 1)" 90 \
                taskset -c 1 "$LG" --port "$FPORT" --floor 1 --mode storm --op barrier --conns "$n" \
                --sources "$SOURCES" --timeout 60 --server-pid "$FPID"
            settle
        fi
        # TCPStore's own server takes seconds per storm: fewer repetitions.
        reps=$((STORM_REPS > 1 ? 2 : 1))
        for rep in $(seq $reps); do
            rec storm "$(tags server tcpstore op add+wait+get conns "$n" rep "$rep")" 100 \
                taskset -c 1 "$LG" --port "$TSPORT" --proto tcpstore-old --mode storm --conns "$n" \
                --sources "$SOURCES" --timeout 80 --server-pid "$TPID"
            settle
        done
    done
}

# Real processes: N forked clients on CPU 1 do barrier + id broadcast; libmuster against
# musterd, torch's own client against TCPStore (and against musterd's listener).
section_rproc() {
    local n rep
    for n in $RPROC_NS; do
        for rep in $(seq $((REPS > 1 ? 2 : 1))); do
            if [ -x "$RPROC" ]; then
                rec rproc "$(tags server musterd client libmuster op barrier conns "$n" rep "$rep")" 120 \
                    taskset -c 1 "$RPROC" --url "tcp://127.0.0.1:$MPORT/rp-b$n-$rep" --procs "$n"
                rec rproc "$(tags server musterd client libmuster op join conns "$n" rep "$rep")" 120 \
                    taskset -c 1 "$RPROC" --url "tcp://127.0.0.1:$MPORT/rp-j$n-$rep" --procs "$n" --op join
            fi
            rec rproc "$(tags server tcpstore client torch op add+wait+get conns "$n" rep "$rep")" 150 \
                taskset -c 1 "$PY" "$HERE/rproc_torch.py" --port "$TSPORT" --procs "$n" --timeout 120 \
                --prefix "rp$n-$rep/"
            if [ "$HAVE_TSL" = 1 ]; then
                rec rproc "$(tags server musterd-tcpstore client torch op add+wait+get conns "$n" rep "$rep")" 150 \
                    taskset -c 1 "$PY" "$HERE/rproc_torch.py" --port "$TSLPORT" --procs "$n" --timeout 120 \
                    --prefix "rp$n-$rep/"
            fi
            settle
        done
    done
}

# Fill keys "/mem/%08d" with 64-byte values on a Redis server through redis-cli --pipe.
redis_fill() {
    local port=$1 keys=$2
    "$PY" -c '
import sys
n, v = int(sys.argv[1]), b"v" * 64
out = sys.stdout.buffer
for i in range(n):
    k = b"/mem/%08d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$64\r\n%s\r\n" % (len(k), k, v))
' "$keys" | redis-cli -p "$port" --pipe >/dev/null
}

# Fill keys on a fresh server of kind srv at port.
mem_fill() {
    local srv=$1 port=$2 keys=$3
    case $srv in
        musterd) taskset -c 1 "$LG" --port "$port" --mode fill --keys "$keys" --key-prefix /mem/ --namespace mem --timeout 120 ;;
        tcpstore) taskset -c 1 "$LG" --port "$port" --proto tcpstore-old --mode fill --keys "$keys" --key-prefix /mem/ --timeout 300 ;;
        redis) redis_fill "$port" "$keys" ;;
    esac >>"$OUT/stderr.log" 2>&1
}

# Start a fresh server of kind srv on port; sets LAST_PID.
mem_start() {
    case $1 in
        musterd) start_musterd "$2" ;;
        tcpstore) start_tcpstore "$2" ;;
        redis) start_redis "$2" ;;
    esac
}

# Memory: idle RSS, growth per key at 100k and 1M keys, and per idle connection, each
# on a fresh server.
section_memory() {
    local srv port pid r0 r k rs proto
    for srv in musterd tcpstore redis; do
        case $srv in musterd) port=29610 ;; tcpstore) port=29510 ;; redis) port=6380 ;; esac
        mem_start "$srv" "$port"
        pid=$LAST_PID
        sleep 1 # let the fresh process finish its start-up allocations
        r0=$(rss_kib "$pid")
        rs="\"rss_idle_kib\":$r0"
        for k in $MEM_KEYS; do
            mem_fill "$srv" "$port" "$k"
            r=$(rss_kib "$pid")
            rs="$rs,\"rss_${k}_kib\":$r,\"bytes_per_key_$k\":$(((r - r0) * 1024 / k))"
        done
        printf '{"section":"memory",%s,"rc":0,"result":{%s}}\n' "$(tags server "$srv" kind keys)" "$rs" >>"$RAW"
        log "memory $srv: $rs"
        stop_pid "$pid"
        # Per idle connection, on another fresh server: bare TCP for the peers, hello for musterd.
        mem_start "$srv" "$port"
        pid=$LAST_PID
        sleep 1
        proto=raw
        [ "$srv" = musterd ] && proto=native
        rm -f "$RUN/ready"
        r0=$(rss_kib "$pid")
        taskset -c 1 "$LG" --port "$port" --proto "$proto" --mode idle --conns "$IDLE_N" --sources "$SOURCES" \
            --hold 30 --timeout 60 --ready-file "$RUN/ready" --namespace idle >"$RUN/idle.json" 2>>"$OUT/stderr.log" &
        local lgpid=$!
        wait_file "$RUN/ready" 30
        sleep 0.5 # the server may still be accepting the last connections' hello
        r=$(rss_kib "$pid")
        kill "$lgpid" 2>/dev/null
        wait "$lgpid"
        printf '{"section":"memory",%s,"rc":0,"result":{"conns":%d,"rss_before_kib":%d,"rss_conns_kib":%d,"bytes_per_conn":%d}}\n' \
            "$(tags server "$srv" kind conns)" "$IDLE_N" "$r0" "$r" $(((r - r0) * 1024 / IDLE_N)) >>"$RAW"
        log "memory $srv: $IDLE_N idle connections: $r0 -> $r KiB"
        stop_pid "$pid"
    done
}
