#!/usr/bin/env bash
# Elastic recovery across real network boundaries: musterd and three
# `muster run` nodes, each in its own network namespace, joined by a bridge
# in a namespace of its own (198.18.0.0/24, the benchmarking range: private
# to the test, no default route).  Cases: a killed worker (every node
# restarts, ranks exact, restart counts agree), a scale-up (no restart
# counted), a 1 s link blip and a soak at 100 ms of one-way latency on every
# host's output plus 1 % packet loss (this kernel has no netem: nfdelay, an
# NFQUEUE delayer, holds the packets; iptables' statistic match drops them)
# that must not break the generation, a node cut off silently (its link taken down on
# the bridge: no FIN, no RST) that the others must learn of from the heartbeat (3 s at
# the default --heartbeat-timeout), a killed launcher whose worker is
# wrapped in a shell (nothing of it survives), and SIGTERM while the store
# is gone (every launcher stops within --grace plus a second).  Needs root
# and `ip netns`; otherwise it skips (exit 77).
# MUSTER_MULTINODE_SOAK_S sets the soak's length (default 60 s); without
# NFDELAY (or NFQUEUE in the kernel) the soak has loss but no latency.
# Usage: test_multinode.sh MUSTERD MUSTER [NFDELAY]
set -u

MUSTERD=${1:?musterd path}
MUSTER=${2:?muster path}
SOAK_S=${MUSTER_MULTINODE_SOAK_S:-60}
NFDELAY=${3:-}
checks=0
failed=0
delayers=
LATENCY=0
id=$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-multinode-XXXXXX")
chmod 755 "$tmp"
OUT=$tmp/out
mkdir -p "$OUT"
BR=mnbr$id
HOSTS="st n1 n2 n3"
pids=

# Record one check: description, then the command that must succeed.
check() {
    local what=$1
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        failed=$((failed + 1))
        echo "FAIL: $what"
        return 1
    fi
    return 0
}

# Kill what the test started and remove the namespaces and files, on every path.
cleanup() {
    for p in $pids; do
        kill -KILL "$p" 2>/dev/null
    done
    for h in $HOSTS; do
        ip netns pids "mn$h$id" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "mn$h$id" 2>/dev/null
    done
    ip netns del "$BR" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# Run a command in host h's namespace.
on() {
    local h=$1
    shift
    ip netns exec "mn$h$id" "$@"
}

# The bridge namespace and one veth per host; host i gets 198.18.0.(i+1).
setup_net() {
    ip netns add "$BR" || return 1
    ip -n "$BR" link add br0 type bridge && ip -n "$BR" link set br0 up || return 1
    local i=1
    for h in $HOSTS; do
        ip netns add "mn$h$id" || return 1
        ip link add "mv$h$id" type veth peer name eth0 netns "mn$h$id" || return 1
        ip link set "mv$h$id" netns "$BR" || return 1
        ip -n "$BR" link set "mv$h$id" master br0 up || return 1
        on "$h" ip addr add "198.18.0.$i/24" dev eth0 || return 1
        on "$h" ip link set eth0 up && on "$h" ip link set lo up || return 1
        i=$((i + 1))
    done
}

# Wait up to $2 seconds for a command ($3...) to succeed.
wait_for() {
    local what=$1 secs=$2
    shift 2
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt "$end" ]; do
        "$@" && return 0
        sleep 0.1
    done
    echo "  timed out waiting for: $what"
    return 1
}

# Count the files matching a glob in $OUT.
count() {
    local n=0
    for f in "$OUT"/$1; do
        [ -e "$f" ] && n=$((n + 1))
    done
    echo "$n"
}

# Whether at least n files match a glob.
have() {
    [ "$(count "$1")" -ge "$2" ]
}

# The worker: record rank, world size, restart count and pid for its generation, then wait for stop.
cat > "$tmp/worker.sh" <<'EOF'
#!/bin/sh
echo "$RANK $WORLD_SIZE $MUSTER_RESTART_COUNT $$ $MUSTER_NODE_ID" > "$OUT/g$MUSTER_GENERATION.r$RANK.tmp"
mv "$OUT/g$MUSTER_GENERATION.r$RANK.tmp" "$OUT/g$MUSTER_GENERATION.r$RANK"
while [ ! -e "$OUT/stop" ]; do sleep 0.1; done
EOF
# The wrapped worker: a shell whose child does the work, as `bash train.sh` would.
cat > "$tmp/wrapped.sh" <<'EOF'
#!/bin/sh
sleep 300 &
echo $! > "$OUT/gc.$MUSTER_NODE_ID.$RANK"
"$(dirname "$0")/worker.sh"
EOF
chmod +x "$tmp/worker.sh" "$tmp/wrapped.sh"
export OUT

# Start musterd in the store namespace; returns once it listens.
start_store() {
    rm -f "$tmp/port"
    ip netns exec "mnst$id" "$MUSTERD" --listen 198.18.0.1:0 --port-file "$tmp/port" --log-file "$tmp/musterd.log" &
    store_pid=$!
    pids="$pids $store_pid"
    wait_for "musterd port file" 10 test -s "$tmp/port" || return 1
    URL="tcp://198.18.0.1:$(cat "$tmp/port")/job$1"
}

# Start a launcher on host h with node id h, extra flags, and a worker script.
launch() {
    local h=$1 worker=$2
    shift 2
    ip netns exec "mn$h$id" "$MUSTER" run --url "$URL" --node-id "$h" --nproc-per-node 2 --grace 1 "$@" "$tmp/$worker" \
        > "$tmp/$h.out" 2> "$tmp/$h.err" &
    eval "l_$h=$!"
    pids="$pids $!"
}

# Wait for launcher pid to exit within secs; its status (or "timeout") goes to $REAPED.
reap() {
    local pid=$1 end=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt "$end" ]; do
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        REAPED=timeout
        return
    fi
    wait "$pid"
    REAPED=$?
}

# The generations recorded so far, newest last.
gens() {
    ls "$OUT" | sed -n 's/^g\([0-9]*\)\.r[0-9]*$/\1/p' | sort -n | uniq
}

# Whether generation g holds exactly ranks 0..n-1, each with world size n and restart count rc.
world_is() {
    local g=$1 n=$2 rc=$3 r
    [ "$(count "g$g.r*")" = "$n" ] || return 1
    for ((r = 0; r < n; r++)); do
        read -r rank ws rcount _ < "$OUT/g$g.r$r" || return 1
        [ "$rank" = "$r" ] && [ "$ws" = "$n" ] && [ "$rcount" = "$rc" ] || return 1
    done
}

# Milliseconds on a clock that only goes forward.
now_ms() {
    local s ns
    read -r s ns < <(date +'%s %N')
    echo $((s * 1000 + 10#$ns / 1000000))
}

# Drop a fraction (iptables' probability) of every packet into and out of every host, or stop (off).
loss() {
    for h in $HOSTS; do
        if [ "$1" = off ]; then
            on "$h" iptables -F INPUT && on "$h" iptables -F OUTPUT
        else
            on "$h" iptables -A INPUT -m statistic --mode random --probability "$1" -j DROP &&
                on "$h" iptables -A OUTPUT -m statistic --mode random --probability "$1" -j DROP
        fi
    done
}

# Add ms of one-way latency to every host's output (an nfdelay per namespace), or "off"; the latency
# in force afterwards goes to $LATENCY (0 when nfdelay is missing or the kernel has no NFQUEUE).
delay() {
    local h
    if [ "$1" = off ]; then
        for h in $HOSTS; do
            on "$h" iptables -D OUTPUT -j NFQUEUE --queue-num 0 --queue-bypass 2>/dev/null
        done
        for p in $delayers; do
            kill -TERM "$p" 2>/dev/null
            wait "$p" 2>/dev/null
        done
        delayers=
        LATENCY=0
        return 0
    fi
    LATENCY=0
    [ -n "$NFDELAY" ] || return 0
    for h in $HOSTS; do
        on "$h" "$NFDELAY" 0 "$1" > "$tmp/nfdelay-$h.log" 2>&1 &
        delayers="$delayers $!"
        pids="$pids $!"
    done
    for h in $HOSTS; do
        wait_for "nfdelay on $h" 5 grep -q "^nfdelay: queue" "$tmp/nfdelay-$h.log" || return 0
        on "$h" iptables -I OUTPUT -j NFQUEUE --queue-num 0 --queue-bypass || return 0
    done
    LATENCY=$1
}

# Round-trip ms from n1 to the store (one ping), for the log.
rtt_ms() {
    on n1 ping -c 1 -W 2 198.18.0.1 2>/dev/null | sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p'
}

# Whether the newest generation holds exactly n ranks with restart count 0.
latest_world() {
    local g
    g=$(gens | tail -1)
    [ -n "$g" ] && world_is "$g" "$1" 0
}

# Case 1: three nodes; one worker is SIGKILLed: every node restarts once in the next generation, with
# exact ranks and one restart count; then all finish with exit 0.
case_killed_worker() {
    start_store 1 || return 1
    launch n1 worker.sh --nnodes 3 --max-restarts 2
    launch n2 worker.sh --nnodes 3 --max-restarts 2
    launch n3 worker.sh --nnodes 3 --max-restarts 2
    check "first world of 6 ranks" wait_for "6 workers" 20 have "g*.r*" 6 || return 1
    local g1
    g1=$(gens | tail -1)
    check "generation $g1: ranks 0-5, restart count 0" world_is "$g1" 6 0
    read -r _ _ _ victim _ < "$OUT/g$g1.r3"
    kill -KILL "$victim"
    check "second world of 6 ranks" wait_for "restart" 20 have "g$((g1 + 1)).r*" 6 || return 1
    check "generation $((g1 + 1)): ranks 0-5, restart count 1 on every node" wait_for "all six" 5 \
        world_is "$((g1 + 1))" 6 1
    touch "$OUT/stop"
    for h in n1 n2 n3; do
        local pid_var=l_$h
        reap "${!pid_var}" 15
        check "launcher $h exits 0 (status $REAPED)" [ "$REAPED" = 0 ]
    done
    check "no failure counted for the clean finish" [ "$(grep -c 'broken: node' "$tmp/musterd.log")" = 1 ]
    kill -TERM "$store_pid"
    wait "$store_pid"
}

# Case 2: two nodes run, a third arrives (--nnodes 2:3): one re-form, no restart counted.  A 1 s
# blip of n3's link and a soak at 1 % loss leave that generation running.  Then n3's link is taken
# down on the bridge (no FIN, no RST): n1 and n2 learn of it from the heartbeat (3 s by default,
# checked within 8 s for a loaded machine) and re-form without it.
case_scale_up_and_cut() {
    rm -f "$OUT"/*
    start_store 2 || return 1
    launch n1 worker.sh --nnodes 2:3 --max-restarts 3 --last-call 500
    launch n2 worker.sh --nnodes 2:3 --max-restarts 3 --last-call 500
    check "world of 4 ranks" wait_for "4 workers" 20 have "g*.r*" 4 || return 1
    launch n3 worker.sh --nnodes 2:3 --max-restarts 3 --last-call 500
    local g
    check "grown to 6 ranks" wait_for "6 workers" 20 have "g*.r*" 6 || return 1
    g=$(gens | tail -1)
    check "grown generation $g: ranks 0-5, restart count 0 (a scale-up is no restart)" \
        wait_for "six" 5 world_is "$g" 6 0
    ip -n "$BR" link set "mvn3$id" down
    sleep 1
    ip -n "$BR" link set "mvn3$id" up
    sleep 4
    check "a 1 s blip breaks nothing" [ "$(gens | tail -1)" = "$g" ]
    delay 100
    loss 0.01
    echo "soak: ${SOAK_S} s at ${LATENCY} ms one-way latency (n1 to store round trip $(rtt_ms) ms) and 1 % loss"
    sleep "$SOAK_S"
    loss off
    delay off
    check "${SOAK_S} s at ${LATENCY} ms latency and 1 % loss breaks nothing" [ "$(gens | tail -1)" = "$g" ]
    local t0
    t0=$(now_ms)
    ip -n "$BR" link set "mvn3$id" down
    check "n1 learns of the silent loss" wait_for "n1 told" 10 grep -q "node n3 lost" "$tmp/n1.err" || return 1
    local took=$(($(now_ms) - t0))
    echo "silent cut: n1 learned of it ${took} ms after the link went down (default --heartbeat-timeout)"
    # The heartbeat (3 s), not TCP (its retransmissions run for minutes), must tell it; how fast is a
    # benchmark's question (bench/faults.sh), so the bound leaves room for a loaded machine.
    check "silent loss learned through the heartbeat, not TCP (took ${took} ms, bound 8 s)" [ "$took" -le 8000 ]
    check "n1 and n2 re-form without n3" wait_for "4 workers" 20 have "g$((g + 1)).r*" 4 || return 1
    check "generation $((g + 1)): ranks 0-3, restart count 1" wait_for "four" 5 world_is "$((g + 1))" 4 1
    # Case 3 on this world: a launcher SIGKILLed with a shell-wrapped worker leaves nothing behind.
    kill -KILL "$l_n3"
    wait "$l_n3" 2>/dev/null
    ip -n "$BR" link set "mvn3$id" up
    touch "$OUT/stop"
    for h in n1 n2; do
        local pid_var=l_$h
        reap "${!pid_var}" 15
        check "launcher $h exits 0 (status $REAPED)" [ "$REAPED" = 0 ]
    done
    kill -TERM "$store_pid"
    wait "$store_pid"
}

# Case 3: a launcher SIGKILLed while its worker is a shell with a child: the child dies too, and the
# other node re-forms alone.  Case 4: with the store SIGKILLed, SIGTERM stops every launcher within
# --grace plus a second.
case_killed_launcher_and_store_gone() {
    rm -f "$OUT"/*
    start_store 3 || return 1
    launch n1 wrapped.sh --nnodes 1:2 --max-restarts 3 --last-call 2000
    launch n2 wrapped.sh --nnodes 1:2 --max-restarts 3 --last-call 2000
    check "world of 4 ranks" wait_for "4 workers" 20 latest_world 4 || return 1
    check "wrapped workers' children recorded" wait_for "children" 5 have "gc.n1.*" 2 || return 1
    local gc1 gc2
    gc1=$(cat "$OUT"/gc.n1.* | head -1)
    gc2=$(cat "$OUT"/gc.n1.* | tail -1)
    local g
    g=$(gens | tail -1)
    kill -KILL "$l_n1"
    wait "$l_n1" 2>/dev/null
    check "the killed launcher's wrapped children die" wait_for "children gone" 5 \
        sh -c "[ ! -e /proc/$gc1 ] || grep -q ') Z' /proc/$gc1/stat; [ ! -e /proc/$gc2 ] || grep -q ') Z' /proc/$gc2/stat"
    check "n2 re-forms alone" wait_for "2 workers" 20 have "g$((g + 1)).r*" 2
    kill -KILL "$store_pid"
    wait "$store_pid" 2>/dev/null
    sleep 2 # the launcher finds the store gone and starts reconnecting
    local t0=$SECONDS
    kill -TERM "$l_n2"
    reap "$l_n2" 5
    check "SIGTERM with the store gone: launcher stopped (status $REAPED)" [ "$REAPED" != timeout ]
    check "within --grace plus a second" [ $((SECONDS - t0)) -le 3 ]
}

if [ "$(id -u)" != 0 ] || ! ip netns add "mnprobe$id" 2>/dev/null; then
    echo "skipped: needs root and ip netns"
    exit 77
fi
# `ip netns exec` needs a mount namespace whose / can be made a slave (it remounts /sys there); a
# chroot or a container without mount propagation refuses that.  Skip, saying why, leaving nothing.
if ! why=$(ip netns exec "mnprobe$id" true 2>&1); then
    ip netns del "mnprobe$id" 2>/dev/null
    echo "skipped: ip netns exec does not work here (${why:-no reason given})"
    exit 77
fi
ip netns del "mnprobe$id"
if ! setup_net; then
    echo "FAIL: cannot set up the namespaces"
    exit 1
fi
case_killed_worker
case_scale_up_and_cut
case_killed_launcher_and_store_gone
if [ "$failed" != 0 ]; then
    for f in "$tmp"/*.err "$tmp/musterd.log"; do
        [ -e "$f" ] && { echo "---- $f"; tail -20 "$f"; }
    done
fi
echo "multinode: $checks checks, $failed failed"
[ "$failed" = 0 ]
