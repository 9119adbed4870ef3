# Shared functions of bench/run.sh (sourced): building, the private network namespace, starting
# and stopping the three servers, reading their memory and counters, and recording one
# bounded measurement as a JSON line in $RAW.  The sections themselves are in sections.sh.

MPORT=29600     # musterd, native protocol
TSLPORT=29501   # musterd's TCPStore listener, when this musterd has one
TSPORT=29500    # torch 1.13's TCPStore server
RPORT=6379      # redis-server
MUSTERD=$BUILD/store-server/musterd
LG=$BUILD/bench/muster-loadgen
PP=$BUILD/bench/muster-pingpong
RPROC=$BUILD/bench/muster-rproc
FLOORD=$BUILD/bench/muster-floord
FPORT=0
FPID=0
LAST_STEP='"after_section":"start"'
MPID=0
TPID=0
RPID=0
HAVE_TSL=0

# Progress line on stderr.
log() {
    printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2
}

# Add "PROGRAM (Debian package PKG)" to BENCH_MISSING when PROGRAM is not on the path.
bench_need() {
    command -v "$1" >/dev/null || BENCH_MISSING+=("$1 (Debian package $2)")
}

# Before the build: what the run compares against and needs, each thing missing named with its
# Debian package, then the exact command that installs them all; 1 when anything is missing.
bench_preflight() {
    BENCH_MISSING=()
    bench_need redis-server redis-server
    bench_need redis-benchmark redis-tools
    bench_need redis-cli redis-tools
    bench_need taskset util-linux
    bench_need unshare util-linux
    if [ "$BUILD_IT" = 1 ]; then
        bench_need meson meson
        bench_need ninja ninja-build
    fi
    "$PY" -c 'import torch' 2>/dev/null || BENCH_MISSING+=("torch for $PY (Debian package python3-torch)")
    "$PY" -c 'import matplotlib' 2>/dev/null || BENCH_MISSING+=("matplotlib for $PY (Debian package python3-matplotlib)")
    [ "$PROFILE" = 1 ] && bench_need perf linux-perf
    [ ${#BENCH_MISSING[@]} = 0 ] && return 0
    log "missing (a peer missing leaves its rows \"not measured\"):"
    local m
    for m in "${BENCH_MISSING[@]}"; do
        log "  $m"
    done
    log "install them with: bash scripts/deps.sh --bench   (or run: bench/run.sh --deps ${ARGS[*]})"
    log "or pass --missing-ok to run without them"
    return 1
}

# Configure (release) and build only the targets the benchmarks need.
bench_build() {
    if [ ! -f "$BUILD/build.ninja" ]; then
        meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null || return 1
    else
        meson configure "$BUILD" -Dbuildtype=release -Db_sanitize=none >/dev/null || return 1
    fi
    ninja -C "$BUILD" store-server/musterd bench/muster-loadgen bench/muster-pingpong bench/muster-floord >&2 || return 1
    ninja -C "$BUILD" bench/muster-rproc >&2 || log "muster-rproc not built: real-process runs use torch only"
}

# Inside the fresh namespace: bring lo up and lift the accept-queue and port-range limits
# (these sysctls belong to the namespace, so the host is untouched).
bench_netns_setup() {
    ip link set lo up || return 1
    sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535 \
        net.ipv4.ip_local_port_range="1024 65000" || return 1
    local ifs
    ifs=$(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' /proc/net/dev | tr '\n' ' ')
    [ "$ifs" = "lo " ] || { log "namespace has interfaces other than lo: $ifs"; return 1; }
}

# The exact command, versions and machine, for results/command.txt.
bench_describe() {
    echo "command: bench/run.sh ${ARGS[*]}"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs"
    echo "memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
    echo "open files (hard): $(ulimit -Hn)"
    echo "redis: $(redis-server --version 2>/dev/null | awk '{print $3}')"
    echo "torch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
    echo "musterd: $("$MUSTERD" --version 2>&1 | head -n 1)"
    echo "musterd TCPStore listener: $("$MUSTERD" --help 2>&1 | grep -q -- --tcpstore-listen && echo yes || echo no)"
    echo "placement: servers on CPU 0; load on CPU 1 (one-CPU case: CPU 0)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Wait (bounded, in tenths of a second) until a file exists and is not empty.
wait_file() {
    local f=$1 tenths=$(($2 * 10))
    while [ ! -s "$f" ] && [ "$tenths" -gt 0 ]; do
        sleep 0.1
        tenths=$((tenths - 1))
    done
    [ -s "$f" ]
}

# Wait (bounded) until something accepts connections on 127.0.0.1:port.
wait_port() {
    local port=$1 tenths=$(($2 * 10))
    while ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [ "$tenths" -gt 0 ]; do
        sleep 0.1
        tenths=$((tenths - 1))
    done
    [ "$tenths" -gt 0 ]
}

# Start musterd on CPU 0 (with its TCPStore listener when it has one) at port $1 (default MPORT).
start_musterd() {
    local port=${1:-$MPORT} extra=()
    if "$MUSTERD" --help 2>&1 | grep -q -- --tcpstore-listen; then
        HAVE_TSL=1
        [ "$port" = "$MPORT" ] && extra=(--tcpstore-listen "127.0.0.1:$TSLPORT")
    fi
    rm -f "$RUN/musterd-$port.port"
    taskset -c 0 "$MUSTERD" --listen "127.0.0.1:$port" --port-file "$RUN/musterd-$port.port" \
        --max-connections 19000 --log-level warn "${extra[@]}" >>"$RUN/musterd-$port.log" 2>&1 &
    local pid=$!
    if ! wait_file "$RUN/musterd-$port.port" 30; then
        log "musterd did not start on $port"
        tail -n 5 "$RUN/musterd-$port.log" >&2
    fi
    [ "$port" = "$MPORT" ] && MPID=$pid
    LAST_PID=$pid
}

# Start torch 1.13's TCPStore server on CPU 0 at port $1 (default TSPORT).
start_tcpstore() {
    local port=${1:-$TSPORT}
    rm -f "$RUN/tcpstore-$port.port"
    taskset -c 0 "$PY" "$HERE/tcpstore_server.py" "$port" --port-file "$RUN/tcpstore-$port.port" \
        >>"$RUN/tcpstore-$port.log" 2>&1 &
    local pid=$!
    wait_file "$RUN/tcpstore-$port.port" 60 || log "TCPStore server did not start on $port"
    [ "$port" = "$TSPORT" ] && TPID=$pid
    LAST_PID=$pid
}

# Start redis-server on CPU 0 at port $1 (default RPORT), no persistence.
start_redis() {
    local port=${1:-$RPORT}
    taskset -c 0 redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
        --daemonize no --maxclients 10000 --protected-mode yes --logfile "$RUN/redis-$port.log" &
    local pid=$!
    wait_port "$port" 10 || log "redis-server did not start on $port"
    [ "$port" = "$RPORT" ] && RPID=$pid
    LAST_PID=$pid
}

# Start the capacity floor server (one read and one write per request) on CPU 0.
start_floord() {
    rm -f "$RUN/floord.port"
    taskset -c 0 "$FLOORD" --port-file "$RUN/floord.port" 2>>"$OUT/stderr.log" &
    FPID=$!
    wait_file "$RUN/floord.port" 10 || log "muster-floord did not start"
    FPORT=$(cat "$RUN/floord.port" 2>/dev/null || echo 0)
}

# Stop one server by pid (TERM, then KILL after 5 s) and reap it.
stop_pid() {
    local pid=$1 n=50
    [ "$pid" -gt 0 ] 2>/dev/null || return 0
    kill "$pid" 2>/dev/null
    while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do
        sleep 0.1
        n=$((n - 1))
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# Stop the three long-lived servers.
stop_all() {
    stop_pid "$MPID"
    stop_pid "$TPID"
    stop_pid "$RPID"
    stop_pid "$FPID"
    MPID=0 TPID=0 RPID=0 FPID=0
}

# Restart musterd if it died since the last step, and say so in the results.
ensure_musterd() {
    if [ "$MPID" -gt 0 ] && ! kill -0 "$MPID" 2>/dev/null; then
        wait "$MPID"
        local rc=$?
        log "musterd exited with status $rc during the previous step; restarting it"
        printf '{"section":"crash","server":"musterd",%s,"rc":%d}\n' "$LAST_STEP" "$rc" >>"$RAW"
        tail -n 5 "$RUN/musterd-$MPORT.log" >>"$OUT/stderr.log"
        start_musterd
    fi
}

# Restart the TCPStore server if it died since the last step.
ensure_tcpstore() {
    if [ "$TPID" -gt 0 ] && ! kill -0 "$TPID" 2>/dev/null; then
        wait "$TPID"
        local rc=$?
        log "TCPStore server exited with status $rc during the previous step; restarting it"
        printf '{"section":"crash","server":"tcpstore",%s,"rc":%d}\n' "$LAST_STEP" "$rc" >>"$RAW"
        start_tcpstore
    fi
}

# Resident set size of pid in KiB.
rss_kib() {
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

# Wait (bounded, 10 s) until at most $1 TCP connections are established in this namespace.
settle() {
    local max=${1:-64} n=100
    while [ "$(ss -Htn state established 2>/dev/null | wc -l)" -gt "$max" ] && [ $n -gt 0 ]; do
        sleep 0.1
        n=$((n - 1))
    done
}

# Dump musterd's counters once (pid, log) and print the "NAME=VALUE" lines of that dump.
mstats() {
    local pid=$1 logf=$2 before n=40
    before=$(grep -c 'stats end' "$logf" 2>/dev/null)
    kill -USR1 "$pid" 2>/dev/null || return 1
    while [ "$(grep -c 'stats end' "$logf" 2>/dev/null)" -le "$before" ] && [ $n -gt 0 ]; do
        sleep 0.05
        n=$((n - 1))
    done
    tac "$logf" | sed -n '/stats end/,/stats begin/p' | awk 'NR > 1 && / stat / {sub(/.* stat /, ""); print} / stats begin/ {exit}'
}

# Counter NAME of musterd (pid $2, log $3) from a fresh SIGUSR1 dump; empty when absent.
mstat() {
    mstats "$2" "$3" | grep -m1 "^$1=" | sed 's/.*=//'
}

# Run one measurement under a time limit and append it to $RAW:
#   rec SECTION 'TAGS' LIMIT_S COMMAND...   TAGS is a JSON fragment ("server":"musterd",...).
# The command prints one JSON object as its last stdout line.
rec() {
    local sec=$1 tags=$2 lim=$3 out rc
    shift 3
    LAST_STEP="\"after_section\":\"$sec\",\"after\":{$tags}"
    timeout -k 5 "$lim" "$@" >"$RUN/out" 2>>"$OUT/stderr.log"
    rc=$?
    out=$(tail -n 1 "$RUN/out")
    case $out in
        "{"*) ;;
        *) out=null ;;
    esac
    printf '{"section":"%s",%s,"rc":%d,"result":%s}\n' "$sec" "$tags" "$rc" "$out" >>"$RAW"
    log "$sec {$tags} rc=$rc $(printf '%s' "$out" | grep -o '"\(ops_per_s\|total_s\|p50\)":[0-9.-]*' | head -n 3 | tr '\n' ' ')"
    ensure_musterd
    ensure_tcpstore
}
