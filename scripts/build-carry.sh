#!/usr/bin/env bash
# Build the release tree that scripts/gpu-device.sh runs on the GPU machine,
# into .carry/ (git-ignored): .carry/build is a meson build directory with
# libmuster-nccl, and .carry/lib holds libprotobuf-c.so.1, which that
# machine lacks.  The benchmarks' programs come along: the load generator and
# the floor server (bench/cpu_per_op.sh), the storm's (bench/storm.sh --build
# .carry/build) and muster-recovery (bench/recovery.sh .carry/build).  The
# binaries link libnccl.so.2 and libcudart.so.13 by
# soname: here they come from NCCL_PREFIX (default /usr/local/cuda), there
# from the system's NCCL (/usr/lib/x86_64-linux-gnu) and CUDA.  Meson's
# build-tree rpaths are relative ($ORIGIN), so the directory can move.
# Usage: bash scripts/build-carry.sh   (then carry ".carry" to the machine)
set -euo pipefail
cd "$(dirname "$0")/.."

NCCL_PREFIX=${NCCL_PREFIX:-/usr/local/cuda}
DIR=.carry/build

mkdir -p .carry/lib
if [ -d "$DIR/meson-private" ]; then
    meson setup --reconfigure "$DIR" -Dnccl_prefix="$NCCL_PREFIX" >/dev/null
else
    meson setup "$DIR" --buildtype=release -Db_ndebug=true -Dnccl=enabled -Dnccl_prefix="$NCCL_PREFIX" >/dev/null
fi
ninja -C "$DIR" client/cli/muster store-server/musterd examples/hello_allreduce bench/gpu_init_vs_torch \
    bench/muster-loadgen bench/muster-floord bench/muster-tsstorm bench/muster-relayhost bench/muster-recovery
# The io_uring floor exists where liburing does (linked statically: nothing to carry).
if ninja -C "$DIR" -t targets all 2>/dev/null | grep -q '^bench/muster-floord-uring:'; then
    ninja -C "$DIR" bench/muster-floord-uring
fi
cp -a /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1* .carry/lib/

# What the GPU machine must provide itself (everything else is in .carry).
echo "carried: $(du -sh .carry | cut -f1) in .carry"
ldd "$DIR/examples/hello_allreduce" | awk '/nccl|cudart|protobuf|event/ {print "  needs " $1}'
