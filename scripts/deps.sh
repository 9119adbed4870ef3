#!/usr/bin/env bash
# Install the Debian 12 packages muster needs (only those missing; sudo when
# not root): `deps.sh` for building and the README's first command (the C demo
# and the lesson's torch script under `muster run`), `deps.sh --test` for the
# test command too, `deps.sh --bench` for bench/run.sh (`bench/run.sh --deps`
# runs it).  NCCL and CUDA are not Debian packages: they are looked up under
# /usr/local/cuda (meson option nccl_prefix).
set -euo pipefail

# Build musterd, libmuster and the CLI; python3-torch runs the lesson's script.
PACKAGES="build-essential meson ninja-build pkg-config libevent-dev libprotobuf-c-dev
protobuf-c-compiler uthash-dev zlib1g-dev libssl-dev libjansson-dev python3 python3-torch"

# Test-only: fuzz builds (clang), certificates (openssl), sd_notify and the unit
# file (systemd), the Python package's build, tests and install (a venv:
# python3-venv; see README's Python section), the container image,
# the etcd cluster of the HA tests, the multinode test's namespaces,
# packet rules and latency (nfdelay, on libnetfilter-queue), Prometheus
# (prometheus, with promtool) for the shipped rules and the scrape test,
# headless Chromium for the status page's test (tests/service/test_status_page.c),
# and `kubectl kustomize` (kubernetes-client) with python3-yaml for the
# Kubernetes manifests' test (tests/service/test_kubernetes.sh).
TEST_PACKAGES="clang libclang-rt-14-dev openssl systemd libsystemd-dev python3-dev python3-pytest
python3-mesonpy python3-pip python3-venv docker.io docker-compose debootstrap etcd-server etcd-client
iproute2 iptables iputils-ping libnetfilter-queue-dev prometheus chromium kubernetes-client python3-yaml"

# bench/run.sh's peers and report: Redis 7 (redis-server; redis-benchmark and
# redis-cli from redis-tools) next to torch's TCPStore (python3-torch, above),
# the report's plot (matplotlib), perf for --profile, and liburing for the io_uring
# floor server (bench/floord_uring.c, bench/cpu_per_op.sh).
BENCH_PACKAGES="redis-server redis-tools python3-matplotlib linux-perf liburing-dev"

case "${1:-}" in
--test) PACKAGES="$PACKAGES $TEST_PACKAGES" ;;
--bench) PACKAGES="$PACKAGES $BENCH_PACKAGES" ;;
"") ;;
*)
    echo "usage: deps.sh [--test | --bench]" >&2
    exit 2
    ;;
esac

missing=
for p in $PACKAGES; do
    # Another package's kubectl (one from Kubernetes' own repository) owns /usr/bin/kubectl, and
    # kubernetes-client would fail to unpack over it; any kubectl renders the manifests.
    if [ "$p" = kubernetes-client ] && command -v kubectl >/dev/null 2>&1; then
        continue
    fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    echo "deps: all packages installed"
    exit 0
fi

SUDO=
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
echo "deps: installing$missing"
$SUDO apt-get update -q
# shellcheck disable=SC2086 # the list is split on purpose
$SUDO apt-get install -y -q --no-install-recommends $missing
