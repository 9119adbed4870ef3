#!/usr/bin/env bash
# `muster status` against a real musterd with --metrics-listen: the job table,
# one job's detail, --json, --watch bounded by --timeout, and the exit
# statuses for an unknown job (1) and an unreachable endpoint (4).
# Usage: test_status.sh MUSTERD MUSTER
set -u
musterd=$1
muster=$2
. "$(dirname "$0")/../lib.sh"
scratch

"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" --metrics-listen 127.0.0.1:0 \
    --metrics-port-file "$tmp/mport" 2>"$tmp/log" &
pid=$!
await_file "$tmp/port" && await_file "$tmp/mport"
export MUSTER_URL="tcp://127.0.0.1:$(cat "$tmp/port")/train"
export MUSTER_METRICS_URL="http://127.0.0.1:$(cat "$tmp/mport")"
check "daemon started" test -s "$tmp/mport"
"$muster" set a 1 && "$muster" set b 2

out=$(timeout 20 "$muster" status)
check "status exits 0" test $? = 0
check "table has a header" grep -q '^JOB ' <<<"$out"
check "table lists the job with its 2 keys" grep -Eq '^train +0 none +0 +0 +0 +0 +2 ' <<<"$out"

out=$(timeout 20 "$muster" status train --json)
check "status JOB --json exits 0" test $? = 0
check "JSON names the job" grep -q '"name":"train"' <<<"$out"
check "JSON has members and timeline" grep -q '"members":\[\],"timeline":\[\]' <<<"$out"

timeout 20 "$muster" status nope >/dev/null 2>&1
check "unknown job exits 1" test $? = 1
timeout 20 "$muster" status --metrics-url http://127.0.0.1:1 >/dev/null 2>&1
check "unreachable endpoint exits 4" test $? = 4
timeout 20 "$muster" status --metrics-url ftp://x >/dev/null 2>&1
check "bad metrics URL exits 2" test $? = 2

out=$(timeout 20 "$muster" status --watch --interval 200 --timeout 900)
check "--watch with --timeout ends by itself, 0" test $? = 0
check "--watch refreshed at least twice" test "$(grep -c '^JOB ' <<<"$out")" -ge 2

echo "status: $fail failed"
test "$fail" = 0
