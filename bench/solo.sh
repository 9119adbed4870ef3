# Sourced by recovery.sh and dies_whole.sh: one musterd on CPU 0 with its port file and log in $WORK,
# stopped and $WORK removed at exit.  Needs WORK; sets MPID and PORT.

MPID=0
PORT=0

# Stop musterd and remove the scratch directory.
solo_cleanup() {
    [ "$MPID" -gt 0 ] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    rm -rf "$WORK"
}
trap solo_cleanup EXIT

# Start musterd binary $1 with log level $2 on CPU 0 (heartbeats every 3.3 s: detection in these
# benchmarks is by the closed connection); sets MPID, and PORT (0 when it did not start).
solo_start() {
    rm -f "$WORK/port"
    taskset -c 0 "$1" --listen 127.0.0.1:0 --port-file "$WORK/port" --max-connections 19000 \
        --heartbeat-timeout 10000 --recovery-timeout 10000 --log-level "$2" >>"$WORK/musterd.log" 2>&1 &
    MPID=$!
    for _ in $(seq 100); do
        [ -s "$WORK/port" ] && break
        sleep 0.05
    done
    PORT=$(cat "$WORK/port" 2>/dev/null || echo 0)
}

# Stop the running musterd.
solo_stop() {
    kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    MPID=0
}
