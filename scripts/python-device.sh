#!/usr/bin/env bash
# The Python package on another machine's Python and torch (a GPU machine
# with torch >= 2.4, say), where protobuf-c's headers and meson-python may be
# missing: `prepare` (here, after scripts/build-carry.sh) puts libmuster's
# objects, the headers and the package's sources in .carry/py; `run` (there,
# from the repository root) compiles muster._core against that Python's
# headers, writes the dist-info that carries the torchrun.handlers entry point
# (what pip would write), then runs two plain torchrun agents with
# `--rdzv-backend muster` (found through the entry point alone: nothing
# imports muster first) and the package's pytest suite.
# Usage: bash scripts/python-device.sh prepare | build | run   (build: the extension only)
set -euo pipefail
cd "$(dirname "$0")/.."
P=$PWD/.carry/py

# Copy what the extension's build needs into .carry/py (full archives, not
# meson's thin ones, so they travel).
prepare() {
    rm -rf "$P"
    mkdir -p "$P/inc/protobuf-c" "$P/pkg/muster"
    cp client/python/src/*.c client/python/src/*.h "$P/"
    cp -r include/muster "$P/inc/"
    cp .carry/build/proto/*.h proto/*.h "$P/inc/"
    cp /usr/include/protobuf-c/protobuf-c.h "$P/inc/protobuf-c/"
    cp client/python/muster/*.py "$P/pkg/muster/"
    local a
    for a in client/libmuster-static.a proto/libmuster-proto.a; do
        (cd .carry/build && ar t "$a" | xargs ar rcs "$P/$(basename "$a")")
    done
    grep -m1 -o "version : '[^']*'" meson.build | cut -d"'" -f2 > "$P/VERSION"
}

# Build the extension against this machine's Python, with the dist-info pip would write.
build() {
    local py=${PYTHON:-python3} inc suf ver
    inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    suf=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    ver=$(cat "$P/VERSION")
    gcc -shared -fPIC -O2 -std=c11 -D_GNU_SOURCE "-DMUSTER_VERSION=\"$ver\"" -I"$P/inc" -I"$inc" \
        "$P/module.c" "$P/conn.c" "$P/events.c" "$P/world.c" -o "$P/pkg/muster/_core$suf" \
        "$P/libmuster-static.a" "$P/libmuster-proto.a" "$P/../lib/libprotobuf-c.so.1" \
        -lssl -lcrypto -Wl,-rpath,"$P/../lib"
    mkdir -p "$P/pkg/muster-$ver.dist-info"
    printf 'Metadata-Version: 2.1\nName: muster\nVersion: %s\n' "$ver" > "$P/pkg/muster-$ver.dist-info/METADATA"
    printf '[torchrun.handlers]\nmuster = muster.torchrun:entry_point\n' > "$P/pkg/muster-$ver.dist-info/entry_points.txt"
}

# Build the extension, then run the agents and the suite against a musterd.
run() {
    local py=${PYTHON:-python3} port dp a
    build
    export PYTHONPATH=$P/pkg LD_LIBRARY_PATH=$P/../lib
    "$py" -c 'import muster, torch; print("muster", muster.__version__, "torch", torch.__version__)'
    rm -f /tmp/muster-py.port
    .carry/build/store-server/musterd --listen 127.0.0.1:0 --port-file /tmp/muster-py.port --log-level warn &
    dp=$!
    for ((a = 0; a < 50; a++)); do [ -s /tmp/muster-py.port ] && break; sleep 0.1; done
    port=$(cat /tmp/muster-py.port)
    for a in 1 2; do
        timeout 180 "$py" -m torch.distributed.run --rdzv-backend muster --rdzv-endpoint "127.0.0.1:$port" \
            --rdzv-id trainjob --nnodes 2 --nproc-per-node 2 --max-restarts 0 --monitor-interval 1 \
            client/python/tests/torchrun_train.py > "/tmp/muster-agent$a.log" 2>&1 &
    done
    wait %2 %3 || true
    echo "torchrun --rdzv-backend muster: $(cat /tmp/muster-agent*.log | grep -o 'world=4 sum=10.0' | wc -l) of 4 workers: world=4 sum=10.0"
    MUSTER_TEST_MUSTERD=$PWD/.carry/build/store-server/musterd timeout 300 \
        "$py" -m pytest -p no:cacheprovider -q -rs client/python/tests || true
    kill "$dp"
}

case ${1:-} in
prepare) prepare ;;
build) build ;;
run) run ;;
*) echo "usage: $0 prepare|build|run" >&2; exit 64 ;;
esac
