#!/usr/bin/env bash
# The data directory fills up while musterd runs: no change is acknowledged
# that is not on disk, the client waiting for one is let go at once, the
# daemon says why, counts it, and exits 74 (EX_IOERR) so a service manager
# sees a failure; restarted on the same files, it has every acknowledged key.  The directory is a 256 KiB tmpfs
# in a mount namespace of the test's own (skipped, 77, where mounting is not
# allowed); the daemon runs inside it and its files are copied out when it
# exits.
# Usage: test_diskfull.sh MUSTERD MUSTER
set -u
musterd=$1
muster=$2
. "$(dirname "$0")/../lib.sh"
scratch

if ! unshare -m --propagation private sh -c "mount -t tmpfs -o size=64k tmpfs '$tmp'" 2>/dev/null; then
    echo "diskfull: skipped: cannot mount a tmpfs in a new mount namespace"
    exit 77
fi

mkdir -p "$tmp/data" "$tmp/saved"
# Inside the namespace: mount, run the daemon until it exits, keep its status and files.
unshare -m --propagation private sh -c "
    mount -t tmpfs -o size=256k tmpfs '$tmp/data' || exit 1
    '$musterd' --listen 127.0.0.1:0 --port-file '$tmp/port' --data-dir '$tmp/data' --compact-bytes 64K \
        --drain-timeout 30000 2>'$tmp/log'
    echo \$? >'$tmp/status'
    cp -a '$tmp/data/.' '$tmp/saved/'
" &
pid=$!
await_file "$tmp/port"
check "daemon started on the small data directory" test -s "$tmp/port"
export MUSTER_URL="tcp://127.0.0.1:$(cat "$tmp/port")/full"

# 2 KB values until a set is not acknowledged (at most 400: the directory holds about 120).
value=$(head -c 2000 /dev/zero | tr '\0' v)
acked=0
refused=0
# Each set runs until it is answered or the daemon is gone (the client would retry for a minute).
for i in $(seq 1 400); do
    started=$(date +%s)
    "$muster" --timeout 60000 set "k$i" "$value" 2>>"$tmp/cli.err" &
    cli=$!
    while kill -0 "$cli" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do
        sleep 0.01
    done
    if kill -0 "$cli" 2>/dev/null; then # the daemon is gone, the client still retrying
        kill "$cli"
        wait "$cli" 2>/dev/null
        refused=$i
        break
    fi
    if wait "$cli"; then
        acked=$i
        continue
    fi
    refused=$i
    break
done
ended=$(date +%s)
wait "$pid"
pid=
# The refused set's reply can never be sent, so its connection is let go at once instead of being kept
# to the end of --drain-timeout (30 s).
check "the daemon exited well within --drain-timeout" test $((ended - started)) -lt 15
echo "  acknowledged $acked sets; set k$refused was not"
check "some sets were acknowledged before the disk filled" test "$acked" -gt 10
check "a set was refused once the disk was full" test "$refused" = $((acked + 1))
check "the daemon exited with 74 (EX_IOERR)" test "$(cat "$tmp/status" 2>/dev/null)" = 74
check "it logged why" grep -q "cannot write the log in .*No space left on device" "$tmp/log"
check "it counted persist_errors" grep -Eq "stat persist_errors=[1-9]" "$tmp/log"

# Restart on a copy of the files in an ordinary directory.
rm -f "$tmp/saved/LOCK" "$tmp/port"
"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" --data-dir "$tmp/saved" 2>"$tmp/log2" &
pid=$!
await_file "$tmp/port"
check "restarted on the same files" test -s "$tmp/port"
export MUSTER_URL="tcp://127.0.0.1:$(cat "$tmp/port")/full"
missing=0
for i in $(seq 1 "$acked"); do
    got=$("$muster" --timeout 5000 get "k$i" 2>/dev/null)
    [ "$got" = "$value" ] || missing=$((missing + 1))
done
check "every acknowledged key is there, whole ($acked)" test "$missing" = 0
# The refused set's outcome is unknown to its client (like any unacknowledged write), so either is right.

echo "diskfull: $fail failed"
test "$fail" = 0
