#!/usr/bin/env bash
# Build and run the whole test suite twice: a -Werror build (build/) and an
# ASan+UBSan build (build-asan/); then, when clang is there, build the
# libFuzzer targets (build-fuzz/) and fuzz each one briefly.  Ends with one
# line "N passed, N failed" summing it all; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

JOBS=${JOBS:-$(nproc)}
failed_steps=0

# Configure dir with the given options (reconfigure when it exists), then build it.
build() {
    local dir=$1
    shift
    if [ -d "$dir/meson-private" ]; then
        meson setup --reconfigure "$dir" "$@" >/dev/null || return 1
    else
        meson setup "$dir" "$@" >/dev/null || return 1
    fi
    ninja -C "$dir" -j "$JOBS"
}

# Run the suite of a build dir; meson's log keeps the per-test results.
run_suite() {
    meson test -C "$1" --print-errorlogs --num-processes "$JOBS"
}

# Count passed and failed tests in a build dir's meson test log.
count() {
    python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = 0
try:
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line).get("result")
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r != "SKIP":
                failed += 1
except FileNotFoundError:
    pass
print(passed, failed)
PY
}

# Build the libFuzzer targets with clang in build-fuzz/ and run each from its
# seed corpus for MUSTER_FUZZ_SECONDS (default 5; 0 runs the seeds only), one
# at a time on one core.  New inputs and crash reproducers go to a scratch
# directory, kept when a target fails.  Non-zero when a target did not build
# or found a crash.
fuzz_step() {
    local secs=${MUSTER_FUZZ_SECONDS:-5} tmp targets t name rc=0 budget dict
    if [ -d build-fuzz/meson-private ]; then
        meson setup --reconfigure build-fuzz -Dwerror=true -Dfuzz=true >/dev/null || return 1
    else
        CC=clang meson setup build-fuzz -Dwerror=true -Dfuzz=true >/dev/null || return 1
    fi
    targets=$(ninja -C build-fuzz -t targets all | sed -n 's|^\(tests/fuzz-[a-z]*\): .*|\1|p' | sort -u)
    [ -n "$targets" ] || return 1
    # shellcheck disable=SC2086 # one word per target
    ninja -C build-fuzz -j "$JOBS" $targets || return 1
    budget=-max_total_time=$secs
    [ "$secs" = 0 ] && budget=-runs=0 # max_total_time=0 would mean no limit
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-fuzz-XXXXXX") || return 1
    for t in $targets; do
        name=${t#tests/fuzz-}
        mkdir -p "$tmp/$name"
        dict=-dict=tests/fuzz/$name.dict
        [ -f "tests/fuzz/$name.dict" ] || dict=-verbosity=1 # no dictionary: the default verbosity, a no-op, in its place
        if "build-fuzz/$t" "$budget" "$dict" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
            -artifact_prefix="$tmp/$name-" "$tmp/$name" "tests/fuzz/corpus/$name" >"$tmp/$name.log" 2>&1; then
            echo "fuzz-$name: $(grep -o 'Done [0-9]* runs.*' "$tmp/$name.log")"
        else
            echo "fuzz-$name: FAILED"
            tail -n 40 "$tmp/$name.log"
            rc=1
        fi
    done
    if [ "$rc" = 0 ]; then
        rm -rf "$tmp"
    else
        echo "== fuzz: logs and crash inputs kept in $tmp"
    fi
    return "$rc"
}

total_pass=0
total_fail=0
for variant in "build -Dwerror=true" \
    "build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false"; do
    # shellcheck disable=SC2086 # variant holds the dir and its options
    set -- $variant
    dir=$1
    rm -f "$dir/meson-logs/testlog.json"
    echo "== $variant"
    if ! build "$@"; then
        echo "== $dir: build failed"
        failed_steps=$((failed_steps + 1))
        continue
    fi
    run_suite "$dir" || true
    # The suite's benchmark lines (figures, not verdicts), where a reader of CI's log sees them.
    grep -h '^bench:' "$dir/meson-logs/testlog.txt" 2>/dev/null || true
    read -r p f < <(count "$dir")
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done

# The fuzz targets (clang only): one step, counted like the docker one.
if command -v clang >/dev/null 2>&1; then
    echo "== fuzz targets (clang, ${MUSTER_FUZZ_SECONDS:-5} s each)"
    if fuzz_step; then
        total_pass=$((total_pass + 1))
    else
        echo "== fuzz: failed"
        total_fail=$((total_fail + 1))
    fi
else
    echo "== fuzz: skipped (no clang)"
fi

# The container image and compose stack (minutes: debootstrap + image build),
# in CI or on request; a machine with no Docker engine skips it (exit 77).
if [ -n "${CI:-}" ] || [ -n "${MUSTER_TEST_DOCKER:-}" ]; then
    echo "== docker image and compose stack"
    bash scripts/docker-test.sh
    case $? in
    0) total_pass=$((total_pass + 1)) ;;
    77) echo "== docker: skipped" ;;
    *) total_fail=$((total_fail + 1)) ;;
    esac
fi

total_fail=$((total_fail + failed_steps))
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ] && [ "$total_pass" -gt 0 ]
