#!/usr/bin/env bash
# Build the muster image and test it for real: the container turns healthy,
# runs as a non-root user, serves the store and the metrics, keeps its data
# across a restart on its volume; then the compose stack runs the seed demo
# on two worker containers through MUSTER_URL.  Host networking throughout,
# on loopback addresses and free ports.
#
# Exit 0 passed, 1 failed, 77 skipped (no docker engine could be reached or
# started, or no base image could be made).  Starts dockerd itself when it
# is installed, not running, and this runs as root; stops it again after.
# Usage: scripts/docker-test.sh   (from anywhere; about 3-10 minutes, most of
# it the first debootstrap and image build)
set -uo pipefail
cd "$(dirname "$0")/.."
image=muster:test
project=mustertest$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-docker-XXXXXX")
dockerd_pid=
cid=
. tests/lib.sh

skip() { echo "SKIP: $*"; exit 77; }
cleanup() {
    [ -n "$cid" ] && docker rm -f "$cid" >/dev/null 2>&1
    [ -n "${compose:-}" ] && "${compose[@]}" down -v >/dev/null 2>&1
    docker volume rm -f "$project-data" >/dev/null 2>&1
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null
        wait "$dockerd_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1 (bound by the kernel, then released).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ------------------------------------------------------------------ engine
command -v docker >/dev/null || skip "no docker CLI"
if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || skip "no docker engine running and no dockerd to start"
    [ "$(id -u)" = 0 ] || skip "no docker engine running, and starting one needs root"
    dockerd >"$tmp/dockerd.log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { tail -5 "$tmp/dockerd.log"; skip "dockerd did not start"; }
fi
if docker compose version >/dev/null 2>&1; then
    compose=(docker compose -p "$project" -f docker/compose.yaml)
elif command -v docker-compose >/dev/null; then
    compose=(docker-compose -p "$project" -f docker/compose.yaml)
else
    compose=()
fi

# ------------------------------------------------------------------- image
docker/mkbase.sh || skip "cannot make the Debian base image (see above)"
git ls-files -co --exclude-standard | tar -c -T - | \
    docker build --network host -f docker/Dockerfile -t "$image" - >"$tmp/build.log" 2>&1
rc=$?
check "image builds" test $rc = 0
[ $rc = 0 ] || { tail -30 "$tmp/build.log"; exit 1; }

# ---------------------------------------------------------- one container
port=$(free_port)
mport=$(free_port)
run_daemon() {
    docker run -d --network host -v "$project-data:/var/lib/muster" \
        -e MUSTER_LISTEN="127.0.0.1:$port" -e MUSTER_METRICS_LISTEN="127.0.0.1:$mport" "$image"
}
# Wait up to 90 s for the container's health check to pass.
await_healthy() {
    local s=
    for _ in $(seq 180); do
        s=$(docker inspect --format '{{.State.Health.Status}}' "$cid" 2>/dev/null)
        [ "$s" = healthy ] && return 0
        sleep 0.5
    done
    echo "health: $s"
    docker logs "$cid" | tail -20
    return 1
}
cid=$(run_daemon)
check "container starts" test -n "$cid"
check "container becomes healthy (HEALTHCHECK on /healthz)" await_healthy
check "daemon runs as a non-root user" test "$(docker exec "$cid" id -u)" != 0
check "data dir is the volume, owned by that user" \
    test "$(docker exec "$cid" stat -c %U /var/lib/muster)" = muster
url="tcp://127.0.0.1:$port/dockertest"
check "set through the container's CLI" docker exec "$cid" muster --url "$url" set greeting hello
check "the image's health check command passes" docker exec "$cid" muster-entrypoint healthcheck
if command -v curl >/dev/null; then
    check "metrics scraped from the host" \
        bash -c "curl -fsS http://127.0.0.1:$mport/metrics | grep -q '^muster_namespace_keys{namespace=\"dockertest\"} 1$'"
fi
docker stop -t 30 "$cid" >/dev/null
check "clean exit on docker stop" test "$(docker inspect --format '{{.State.ExitCode}}' "$cid")" = 0
docker rm "$cid" >/dev/null
cid=$(run_daemon)
await_healthy >/dev/null
check "value survives a new container on the same volume" \
    test "$(docker exec "$cid" muster --url "$url" get greeting)" = hello
docker rm -f "$cid" >/dev/null
cid=

# ----------------------------------------------------------------- compose
if [ ${#compose[@]} = 0 ]; then
    echo "SKIP compose stack: neither 'docker compose' nor docker-compose is installed"
else
    export MUSTER_IMAGE=$image MUSTER_PORT=$port MUSTER_METRICS_PORT=$mport
    "${compose[@]}" up -d musterd >"$tmp/compose.log" 2>&1
    check "compose: musterd up" test $? = 0
    timeout 300 "${compose[@]}" up --no-color worker-a worker-b >"$tmp/workers.log" 2>&1
    for r in 0 1 2 3; do
        check "compose: rank $r all-reduced to 10.0" grep -q "\[Rank $r\] After all_reduce: \[10.0\]" "$tmp/workers.log"
    done
    for w in worker-a worker-b; do
        c=$("${compose[@]}" ps -q "$w")
        check "compose: $w exited 0" test "$(docker inspect --format '{{.State.ExitCode}}' "$c")" = 0
    done
    [ $fail = 0 ] || tail -40 "$tmp/workers.log"
    "${compose[@]}" down -v >/dev/null 2>&1
fi
echo "docker: $fail failed"
test $fail = 0
