# Load and fault runs and the musterd profile for bench/run.sh (sourced after lib.sh and
# sections.sh): many idle connections plus a burst, one client stalled half way through a
# request while 64 others run, 1000 clients killed while parked, and perf on the hot path.

# Value of counter NAME in a dump (stdin); "null" when the server has no such counter.
statv() {
    local v
    v=$(grep -m1 "^$1=" | sed 's/.*=//')
    echo "${v:-null}"
}

# Parked requests from a dump: the waiters_current gauge when the server has one, else
# parked minus woken, canceled and timed out.
parked_now() {
    local d=$1 g
    g=$(statv waiters_current <<<"$d")
    if [ "$g" != null ]; then
        echo "$g"
        return
    fi
    echo $(($(statv waits_parked <<<"$d") - $(statv waits_woken <<<"$d") - $(statv waits_canceled <<<"$d") \
        - $(statv timeouts <<<"$d")))
}

# 1000 clients parked in op (wait or join) are killed with SIGKILL; how long until the
# daemon's connection and waiter counts are back where they started.
fault_kill() {
    local op=$1 logf=$RUN/musterd-$MPORT.log d c0 cdur pdur c p t0 lgpid parked n=200
    d=$(mstats "$MPID" "$logf")
    c0=$(statv connections_current <<<"$d")
    rm -f "$RUN/ready"
    taskset -c 1 "$LG" --port "$MPORT" --mode idle --op "$op" --conns 1000 --hold 120 --timeout 150 \
        --op-timeout-ms 600000 --ready-file "$RUN/ready" --namespace "kill-$op" >/dev/null 2>>"$OUT/stderr.log" &
    lgpid=$!
    wait_file "$RUN/ready" 30
    parked=$(grep -o '[0-9]* parked' "$RUN/ready" | cut -d' ' -f1)
    d=$(mstats "$MPID" "$logf")
    cdur=$(statv connections_current <<<"$d")
    pdur=$(parked_now "$d")
    kill -9 "$lgpid"
    wait "$lgpid" 2>/dev/null
    t0=$(date +%s%N)
    while [ $n -gt 0 ]; do
        d=$(mstats "$MPID" "$logf")
        c=$(statv connections_current <<<"$d")
        p=$(parked_now "$d")
        [ "$c" != null ] && [ "$c" -le "$c0" ] && [ "$p" -le 0 ] && break
        n=$((n - 1))
    done
    printf '{"section":"faults",%s,"rc":0,"result":{"parked_by_client":%s,"conns_before":%s,"conns_during":%s,"parked_during":%s,"conns_after":%s,"parked_after":%s,"clean":%s,"clean_s":%s}}\n' \
        "$(tags server musterd test "kill_$op" conns 1000)" "${parked:-0}" "$c0" "$cdur" "$pdur" "$c" "$p" \
        "$([ $n -gt 0 ] && echo true || echo false)" "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {print (b - a) / 1e9}')" >>"$RAW"
    log "faults kill_$op: connections $c0 -> $cdur -> $c, parked $pdur -> $p"
    settle
}

# The load and fault runs.
section_faults() {
    local srv proto port pid stall
    for srv in musterd tcpstore; do
        case $srv in
            musterd) proto=native port=$MPORT pid=$MPID ;;
            tcpstore) proto=tcpstore-old port=$TSPORT pid=$TPID ;;
        esac
        rec faults "$(tags server "$srv" test idle_burst conns "$IDLE_N")" 120 \
            taskset -c 1 "$LG" --port "$port" --proto "$proto" --mode idle --conns "$IDLE_N" --sources "$SOURCES" \
            --hold 2 --burst 1 --timeout 90 --server-pid "$pid"
        settle
        for stall in 0 1; do
            rec faults "$(tags server "$srv" test stall stalled "$stall" op get conns 64)" 60 \
                taskset -c 1 "$LG" --port "$port" --proto "$proto" --op get --conns 64 --stall "$stall" \
                --duration 3 --requests 5000000 --timeout 20 --server-pid "$pid"
            settle
        done
        # torch 1.13's server stays stuck on the stalled client; start it afresh.
        if [ "$srv" = tcpstore ]; then
            stop_pid "$TPID"
            start_tcpstore
        fi
    done
    fault_kill wait
    fault_kill join
}

# perf profile of musterd under 128 closed-loop get clients, and system calls per request.
section_profile() {
    command -v perf >/dev/null || { log "perf not installed"; return; }
    local logf=$RUN/musterd-$MPORT.log lgpid d0 d1 sys req
    taskset -c 1 "$LG" --port "$MPORT" --op get --conns 128 --duration 12 --requests 100000000 \
        --server-pid "$MPID" >"$RUN/prof.json" 2>>"$OUT/stderr.log" &
    lgpid=$!
    sleep 2 # past the connects and the prefill
    timeout 20 perf record -q -F 1999 -g -p "$MPID" -o "$RUN/perf.data" -- sleep 4 2>>"$OUT/stderr.log"
    d0=$(mstats "$MPID" "$logf")
    sys=$(timeout 20 perf stat -x, -e raw_syscalls:sys_enter -p "$MPID" -- sleep 3 2>&1 | awk -F, '/sys_enter/ {print $1}')
    d1=$(mstats "$MPID" "$logf")
    wait "$lgpid"
    req=$(($(statv requests <<<"$d1") - $(statv requests <<<"$d0")))
    perf report -i "$RUN/perf.data" --stdio --no-children --sort symbol --percent-limit 0.5 2>/dev/null |
        grep -v '^$' | head -n 400 >"$OUT/profile-perf.txt"
    printf '{"section":"profile",%s,"rc":0,"result":{"syscalls":%s,"requests":%s,"syscalls_per_request":%s}}\n' \
        "$(tags server musterd op get conns 128)" "${sys:-0}" "$req" \
        "$(awk -v s="${sys:-0}" -v r="$req" 'BEGIN {printf "%.3f", (r > 0 ? s / r : 0)}')" >>"$RAW"
    log "profile: ${sys:-?} system calls for $req requests (perf report in $OUT/profile-perf.txt)"
}
