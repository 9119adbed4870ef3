#!/usr/bin/env bash
# Make the Debian 12 base image the Dockerfile builds on, without any image
# registry: a minimal bookworm root filesystem from debootstrap, imported as
# an image.  Needs root, debootstrap and a reachable Debian mirror.
# Usage: docker/mkbase.sh [IMAGE] [MIRROR]
#   IMAGE   default muster/debian:bookworm (the Dockerfile's BASE default)
#   MIRROR  default $DEBIAN_MIRROR, else http://deb.debian.org/debian
set -euo pipefail
image=${1:-muster/debian:bookworm}
mirror=${2:-${DEBIAN_MIRROR:-http://deb.debian.org/debian}}

if docker image inspect "$image" >/dev/null 2>&1; then
    echo "mkbase: $image already exists"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "mkbase: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "mkbase: debootstrap needs root" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/tmp}/muster-rootfs-XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "mkbase: debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    rm -f "$root.log"
    exit 1
}
rm -f "$root.log"
# Smaller and reproducible: no package lists or caches, and apt told to keep it that way.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$root/etc/apt/apt.conf.d/90muster"
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - "$image"
echo "mkbase: imported $image"
