#!/usr/bin/env bash
# Build and run the whole test suite twice: a -Werror build (build/) and an
# ASan+UBSan build (build-asan/).  Ends with one line "N passed, N failed"
# summing both runs; exits non-zero on any failure.
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
    read -r p f < <(count "$dir")
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done

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
