#!/usr/bin/env bash
# No file of a library calls into a file that (directly or not) calls back
# into it.  For each object of the static archive, the symbols it leaves
# undefined are resolved to the other object of the archive that defines
# them; the resulting "file -> the files it uses" graph is printed and must
# have no cycle (tsort finds one).  The last line is the files in an order
# where each uses only files before it.
# With --folders A,B,..., the nodes are folders instead: meson names the
# object of A/x.c "A_x.c.o", so an object is put in the folder its name
# starts with, or in "root" when it starts with none of them.
# Usage: check_layers.sh [--folders A,B,...] ARCHIVE.a
set -euo pipefail
export LC_ALL=C
folders=
if [ "${1:-}" = --folders ]; then
    folders=${2:?folder list}
    shift 2
fi
archive=${1:?static archive}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-layers-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# "object symbol" pairs from nm -A lines (thin or normal archives): the
# object is the member's base name without .c.o, the symbol the last field.
pairs() {
    awk '{ f = $1; sub(/:[0-9a-f]*$/, "", f); n = split(f, p, "/"); o = p[n]; sub(/^.*:/, "", o);
           sub(/\.o$/, "", o); sub(/\.c$/, "", o); print o, $NF }' | to_folder
}

# With --folders, replace each object name by its folder's.
to_folder() {
    if [ -z "$folders" ]; then
        cat
        return
    fi
    awk -v list="$folders" 'BEGIN { n = split(list, f, ","); for (i = 1; i <= n; i++) is[f[i]] = 1 }
        { d = $1; sub(/_.*$/, "", d); if (!(d in is) || d == $1) d = "root"; print d, $2 }'
}
nm -A --defined-only -g "$archive" | pairs | sort -k2,2 -u | awk '{ print $2, $1 }' | sort >"$tmp/defs"
nm -A -u "$archive" | pairs | awk '{ print $2, $1 }' | sort >"$tmp/undef"
awk '{ print $2 }' "$tmp/defs" | sort -u >"$tmp/objects"

# "user used" edges between different objects.
join "$tmp/undef" "$tmp/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u >"$tmp/edges"
while read -r o; do
    printf '%s -> %s\n' "$o" "$(awk -v o="$o" '$1 == o { printf "%s ", $2 }' "$tmp/edges")"
done <"$tmp/objects"

# tsort orders "a b" pairs with a first: feed "used user", plus every object alone.
if ! { awk '{ print $2, $1 }' "$tmp/edges"; awk '{ print $1, $1 }' "$tmp/objects"; } |
    tsort >"$tmp/order" 2>"$tmp/loop"; then
    echo "FAIL: the files of $(basename "$archive") call each other in a cycle:"
    cat "$tmp/loop"
    exit 1
fi
echo "order (each uses only files before it): $(tr '\n' ' ' <"$tmp/order")"
