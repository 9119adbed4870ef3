#!/usr/bin/env bash
# What the HTTP status endpoints cost with many one-node jobs (bench/statusload.c).
# Usage: bench/statusload.sh MUSTERD STATUSLOAD [N=20000] [extra musterd flags...]
set -eu
musterd=$1 load=$2 n=${3:-20000}
shift 3 || shift $#
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" --metrics-listen 127.0.0.1:0 \
    --metrics-port-file "$tmp/mport" --max-namespaces-per-source 1000000 --log-level warn "$@" 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && [ -s "$tmp/mport" ] && break; sleep 0.1; done
timeout 300 "$load" "tcp://127.0.0.1:$(cat "$tmp/port")" "$(cat "$tmp/mport")" "$pid" "$n"
