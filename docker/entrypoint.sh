#!/bin/bash
# Container entrypoint for the muster image.
#   (no arguments) | musterd [FLAGS]   run the daemon (settings from MUSTER_* variables)
#   healthcheck                       exit 0 when /healthz on MUSTER_METRICS_LISTEN answers 200
#   anything else                     run it (muster, hello_allreduce, a shell)
# The health check speaks HTTP through bash's /dev/tcp, so the image needs no curl.
set -euo pipefail

# Exit 0 when the daemon's /healthz answers 200 within 2 seconds.
healthcheck() {
    local listen=${MUSTER_METRICS_LISTEN:?MUSTER_METRICS_LISTEN is not set}
    local port=${listen##*:} host=${listen%:*}
    host=${host#[}
    host=${host%]}
    case $host in 0.0.0.0 | "" | "*") host=127.0.0.1 ;; :: ) host=::1 ;; esac
    exec 3<>"/dev/tcp/$host/$port"
    printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$host" >&3
    local status
    read -r -t 2 _ status _ <&3
    [ "$status" = 200 ]
}

case ${1:-musterd} in
musterd)
    shift $(($# > 0 ? 1 : 0))
    exec musterd "$@"
    ;;
healthcheck)
    healthcheck
    ;;
*)
    exec "$@"
    ;;
esac
