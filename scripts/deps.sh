#!/usr/bin/env bash
# Install the Debian 12 packages muster builds and tests with (only those
# missing; sudo when not root).  NCCL and CUDA are not Debian packages: they
# are looked up under /usr/local/cuda (meson option nccl_prefix).
set -euo pipefail

PACKAGES="build-essential meson ninja-build pkg-config libevent-dev libprotobuf-c-dev
protobuf-c-compiler uthash-dev clang libclang-rt-14-dev python3 zlib1g-dev libsystemd-dev libssl-dev
openssl systemd python3-torch python3-dev python3-pytest python3-mesonpy python3-pip docker.io docker-compose debootstrap libjansson-dev etcd-server etcd-client"

missing=
for p in $PACKAGES; do
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
