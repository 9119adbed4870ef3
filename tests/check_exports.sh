#!/usr/bin/env bash
# The shared library exports exactly the symbols its version script lists,
# and every one of them is in the muster_ namespace.
# Usage: check_exports.sh LIBMUSTER.SO LIBMUSTER.MAP
set -euo pipefail
lib=${1:?library}
map=${2:?version script}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-exports-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols, minus the version-node markers (type A).
nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u >"$tmp/exported"
# Names listed under global: in the map (comments stripped).
sed -e 's@/\*.*\*/@@g' -e 's/#.*//' "$map" |
    awk '/global:/ { g = 1; next } /local:/ { g = 0 } g' |
    grep -o '[A-Za-z_][A-Za-z0-9_]*' | sort -u >"$tmp/listed"

status=0
if ! diff -u "$tmp/listed" "$tmp/exported" >"$tmp/diff"; then
    echo "FAIL: exported symbols differ from $map (- listed only, + exported only):"
    cat "$tmp/diff"
    status=1
fi
if grep -v '^muster_' "$tmp/exported" >"$tmp/bad"; then
    echo "FAIL: exported symbols outside the muster_ prefix:"
    cat "$tmp/bad"
    status=1
fi
echo "exports: $(wc -l <"$tmp/exported") symbols checked"
exit $status
