#!/usr/bin/env bash
# The docs follow the op list (proto/oplist.h): README's op table names
# every op, and muster.h's list of ops a failover handle sends again after
# a lost connection is exactly the ops marked OPL_RESEND.
# Usage: check_oplist.sh SOURCE_ROOT
set -euo pipefail
root=${1:?source root}
list=$root/proto/oplist.h
readme=$root/README.md
header=$root/include/muster/muster.h
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-oplist-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# X(CASE, name, flags) lines of the list: every name, and the names marked OPL_RESEND.
sed -n 's/^[[:space:]]*X([A-Z_]*, *\([a-z_]*\), *\(.*\)) *\\\{0,1\}$/\1 \2/p' "$list" >"$tmp/ops"
awk '{ print $1 }' "$tmp/ops" | sort -u >"$tmp/all"
awk '/OPL_RESEND/ { print $1 }' "$tmp/ops" | sort -u >"$tmp/resend"
if [ "$(wc -l <"$tmp/all")" -lt 10 ]; then
    echo "FAIL: could not read the op list from $list"
    exit 1
fi

status=0
# README: the first column of the table that starts with "| op | client call".
awk '/^\| op \| client call/ { t = 1; next } t && !/^\|/ { exit } t { print }' "$readme" |
    awk -F'|' '{ print $2 }' | grep -oE '[a-z_]+' | sort -u >"$tmp/readme"
if ! comm -23 "$tmp/all" "$tmp/readme" >"$tmp/missing" || [ -s "$tmp/missing" ]; then
    echo "FAIL: README's op table does not name these ops of $list:"
    cat "$tmp/missing"
    status=1
fi

# muster.h: the bullet "- set, get, ... in flight on the lost connection are sent again".
sed 's/^ \*//' "$header" | tr '\n' ' ' | tr -s ' ' |
    grep -oE -- '- [a-z_, ]+ in flight on the lost connection are sent again' |
    sed -e 's/^- //' -e 's/ in flight.*//' -e 's/ and /, /' | tr ',' '\n' | tr -d ' ' | grep . | sort -u \
    >"$tmp/header" || true
if [ ! -s "$tmp/header" ]; then
    echo "FAIL: no list of ops sent again found in $header"
    status=1
elif ! diff -u "$tmp/resend" "$tmp/header" >"$tmp/diff"; then
    echo "FAIL: muster.h's ops sent again differ from OPL_RESEND in $list (- list only, + muster.h only):"
    cat "$tmp/diff"
    status=1
fi
echo "oplist: $(wc -l <"$tmp/all") ops, $(wc -l <"$tmp/resend") sent again, checked against README and muster.h"
exit $status
