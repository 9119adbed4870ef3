#!/usr/bin/env bash
# CLI tests: the `muster` command against a real musterd on 127.0.0.1 port 0.
# Checks exit codes (0 ok, 1 negative answer, 2 usage, 3 timeout, 4 cannot
# connect) and that values pass through stdin/stdout byte for byte.
# Usage: test_cli.sh MUSTERD MUSTER
set -u

MUSTERD=${1:?musterd path}
MUSTER=${2:?muster path}
checks=0
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-cli-XXXXXX")
pid=
pid2=

# Stop the daemons and remove the temp dir, whatever happened.
cleanup() {
    local p
    for p in $pid $pid2; do
        if kill -0 "$p" 2>/dev/null; then
            kill -KILL "$p" 2>/dev/null
            wait "$p" 2>/dev/null
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# Record a failed check with its description.
fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}

# expect CODE DESCRIPTION ARGS...: run muster ARGS (bounded) and compare its exit code.
expect() {
    local want=$1 what=$2 got
    shift 2
    checks=$((checks + 1))
    timeout 20 "$MUSTER" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" != "$want" ]; then
        fail "$what: exit $got, want $want (stderr: $(head -c 300 "$tmp/err"))"
    fi
}

# expect_err TEXT DESCRIPTION: the last command's stderr holds TEXT (fixed string); "!TEXT": it does not.
expect_err() {
    checks=$((checks + 1))
    if [ "${1#!}" != "$1" ]; then
        ! grep -qF -- "${1#!}" "$tmp/err" || fail "$2: stderr holds '${1#!}': $(head -c 300 "$tmp/err")"
    else
        grep -qF -- "$1" "$tmp/err" || fail "$2: stderr lacks '$1': $(head -c 300 "$tmp/err")"
    fi
}

# expect_out TEXT DESCRIPTION: the last command printed exactly TEXT (plus one optional newline).
expect_out() {
    checks=$((checks + 1))
    local got
    got=$(cat "$tmp/out")
    [ "$got" = "$1" ] || fail "$2: printed '$got', want '$1'"
}

"$MUSTERD" --listen 127.0.0.1:0 --port-file "$tmp/port" 2>"$tmp/musterd.log" &
pid=$!
for _ in $(seq 1 1000); do
    [ -s "$tmp/port" ] && grep -q . "$tmp/port" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
done
port=$(head -n1 "$tmp/port" 2>/dev/null)
if [ -z "$port" ]; then
    echo "FAIL: musterd did not write its port file"
    cat "$tmp/musterd.log"
    exit 1
fi
export MUSTER_URL="tcp://127.0.0.1:$port/cli"

# 0: success; values and numbers come back exactly.
expect 0 "set" set greeting hello
expect 0 "get" get greeting
expect_out "hello" "get prints the value"
expect 0 "add" add counter 5
expect_out "5" "add prints the new value"
expect 0 "add negative" add counter -7
expect_out "-2" "add prints the new value"
expect 0 "check present" check greeting counter
expect 0 "wait present" wait greeting
expect 0 "barrier of one" barrier solo 1
expect 0 "barrier --fetch" barrier fetched 1 --fetch greeting
expect_out "hello" "barrier --fetch prints the value at release"
expect 1 "barrier --fetch of an absent key" barrier fetched 1 --fetch nothing
expect 0 "ping" ping
expect 0 "num-keys" num-keys
expect_out "2" "num-keys counts the namespace's keys"
expect 0 "queue-push" queue-push jobs first
expect_out "1" "queue-push prints the length"
expect 0 "queue-push again" queue-push jobs second
expect 0 "queue-len" queue-len jobs
expect_out "2" "queue-len prints the length"
expect 0 "queue-pop" queue-pop jobs
expect_out "first" "queue-pop prints the oldest value"
expect 0 "queue-pop --wait of a non-empty queue" queue-pop jobs --wait
expect_out "second" "queue-pop takes values in order"
expect 1 "queue-pop of an empty queue" queue-pop jobs
expect 0 "queues are not keys" num-keys
expect_out "2" "num-keys leaves queues out"
expect 0 "keys" keys ""
expect 0 "--url flag wins over MUSTER_URL" --url "tcp://127.0.0.1:$port/other" set k v
expect 1 "other namespace is separate" get k
expect 0 "cas swaps" cas greeting hello bye
expect 0 "get after cas" get greeting
expect_out "bye" "cas stored the new value"

# 1: a negative answer.
expect 1 "get absent" get nosuchkey
expect 1 "check absent" check greeting nosuchkey
expect 0 "del present" del greeting
expect 1 "del absent" del greeting

# 2: usage errors.
expect 2 "unknown verb" frobnicate
expect 2 "missing args" set
expect 2 "too many args" get a b c d e
expect 2 "no verb"
expect 0 "help" --help

# 3: timeout answered by the server.
expect 3 "get --wait timeout" --timeout 300 get --wait nosuchkey
expect 3 "wait timeout" --timeout 300 wait nosuchkey
expect 3 "barrier timeout" --timeout 300 barrier lonely 2


# Binary-safe values through stdin and stdout.
head -c 65536 /dev/urandom >"$tmp/bin"
printf '\0\0\n\377' >>"$tmp/bin"
expect 0 "set from stdin" set blob - <"$tmp/bin"
checks=$((checks + 1))
if timeout 20 "$MUSTER" get blob >"$tmp/bin.out" 2>"$tmp/err" && cmp -s "$tmp/bin" "$tmp/bin.out"; then :; else
    fail "get blob: stdout differs from the bytes set"
fi
expect 0 "get -o FILE" get blob -o "$tmp/bin.file"
checks=$((checks + 1))
cmp -s "$tmp/bin" "$tmp/bin.file" || fail "get -o: file differs from the bytes set"
expect 0 "set -f FILE" set blob2 -f "$tmp/bin"
checks=$((checks + 1))
if timeout 20 "$MUSTER" get blob2 >"$tmp/bin2.out" 2>"$tmp/err" && cmp -s "$tmp/bin" "$tmp/bin2.out"; then :; else
    fail "set -f then get: bytes differ"
fi

# A blocking get released by a set from another process.
timeout 20 "$MUSTER" --timeout 10000 get --wait later >"$tmp/later.out" 2>"$tmp/err" &
waiter=$!
expect 0 "set releases waiter" set later "now-set"
wait "$waiter"
rc=$?
checks=$((checks + 1))
if [ "$rc" != 0 ] || [ "$(cat "$tmp/later.out")" != "now-set" ]; then
    fail "blocking get: exit $rc, printed '$(cat "$tmp/later.out")'"
fi

# Messages that name what is wrong, against a second daemon: a namespace guarded by a token, and the
# HTTP endpoint (--metrics-listen) that `muster status` reads.
"$MUSTERD" --listen 127.0.0.1:0 --port-file "$tmp/port2" --metrics-listen 127.0.0.1:0 \
    --metrics-port-file "$tmp/mport2" --token sec=T0ken 2>"$tmp/musterd2.log" &
pid2=$!
for _ in $(seq 1 1000); do
    [ -s "$tmp/port2" ] && [ -s "$tmp/mport2" ] && break
    sleep 0.01
done
port2=$(head -n1 "$tmp/port2" 2>/dev/null)
mport2=$(head -n1 "$tmp/mport2" 2>/dev/null)
expect 5 "native client on the HTTP port" --url "tcp://127.0.0.1:$mport2" --timeout 2000 get k
expect_err "the port speaks HTTP, not muster's protocol" "HTTP port named"
expect_err "!1213486160" "HTTP port: no frame length"
expect 5 "no token" --url "tcp://127.0.0.1:$port2/sec" get k
expect_err "needs a token and none was given" "no token said"
expect_err "!wrong token" "no token is not a wrong one"
expect 5 "wrong token" --url "tcp://127.0.0.1:$port2/sec?token=nope" get k
expect_err "wrong token for namespace 'sec'" "wrong token said"
expect 0 "right token" --url "tcp://127.0.0.1:$port2/sec?token=T0ken" set k v
expect 2 "URL typo" --url "tcp://127.0.0.1:$port2/sec?timout=5" get k
expect_err "query parameter 'timout' is unknown" "URL typo named"

# `muster status` reads the daemon the store URL names: $MUSTER_METRICS_URL on that host, else port
# 29601 of that host (here nothing listens there).
export MUSTER_METRICS_URL="http://127.0.0.1:$mport2"
expect 0 "status with --url on the metrics URL's host" --url "tcp://127.0.0.1:$port2/sec" status
checks=$((checks + 1))
grep -q '^sec ' "$tmp/out" || fail "status lists the job of the --url daemon: $(head -c 300 "$tmp/out")"
expect 4 "status with --url on another host" --url "tcp://127.0.0.2:$port2/sec" --timeout 2000 status
expect_err "http://127.0.0.2:29601" "status reads the --url host"
unset MUSTER_METRICS_URL
saved_url=$MUSTER_URL
export MUSTER_URL="tcp://127.0.0.2:$port2/sec"
expect 4 "status with MUSTER_URL on another host" --timeout 2000 status
expect_err "http://127.0.0.2:29601" "status reads the MUSTER_URL host"
export MUSTER_URL=$saved_url
kill -TERM "$pid2"
wait "$pid2"
pid2=

# The daemon drains and exits 0.
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
checks=$((checks + 1))
[ "$rc" = 0 ] || fail "musterd exit status $rc after SIGTERM"

# 4: cannot connect.  Port 1, not the stopped daemon's: under a parallel test run another daemon may
# already have been given that port.
expect 4 "connection refused" --url "tcp://127.0.0.1:1/cli" --timeout 500 get k
expect_err "cannot reach 127.0.0.1 port 1: Connection refused" "a refused connection names host, port and why"
# A host that does not exist fails at once, not after the call's whole timeout.
start=$(date +%s)
expect 4 "no such host" --url "tcp://no-such-host.invalid:1/cli" --timeout 20000 get k
expect_err "no-such-host.invalid port 1: cannot resolve the host name" "an unknown host is named"
checks=$((checks + 1))
[ $(($(date +%s) - start)) -lt 10 ] || fail "an unknown host was retried for the call's whole timeout"
# muster run: a down store is told at once with what is retried, and ends within --connect-timeout.
start=$(date +%s)
expect 4 "muster run against a down store" --url "tcp://127.0.0.1:1/cli" run --connect-timeout 2 true
expect_err "cannot reach 127.0.0.1 port 1: Connection refused; retrying for up to 2 s (--connect-timeout)" \
    "muster run says at once what it retries"
checks=$((checks + 1))
[ $(($(date +%s) - start)) -lt 12 ] || fail "muster run outlived --connect-timeout 2"

echo "cli: $checks checks, $failed failed"
[ "$failed" = 0 ]
