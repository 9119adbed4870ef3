#!/bin/sh
# The folder-level include graph of store-server/, read from the #include "..." lines: every
# folder (core, base, durable, ha, io, native, tcpstore, and "root" for store-server/ itself) and
# the folders whose headers it names (proto/ and include/ outside store-server/ count too), then
# every cycle between two folders.  Headers are named bare (the build puts every folder on the
# include path), so a name is looked up among store-server's files; one found nowhere there is
# left out (a system or generated header).
# It asserts two rules and exits 1 when one breaks: no two folders reach each other through their
# includes (the layers form a line, README.md's Layout), and core/ includes nothing outside core/ and
# proto/.
# Usage: check_folders.sh [SOURCE_ROOT]
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
srv=$root/store-server
tab=$(mktemp) || exit 1
edges=$(mktemp) || exit 1
trap 'rm -f "$tab" "$edges"' EXIT

folder_of() { # path relative to store-server/ -> folder name
    case $1 in */*) echo "${1%%/*}" ;; *) echo root ;; esac
}

# name -> folder, for every header under store-server/, proto/ and include/
(cd "$srv" && find . -name '*.h' | sed 's|^\./||') | while read -r f; do
    echo "$(basename "$f") $(folder_of "$f")"
done >"$tab"
(cd "$root" && find proto include -name '*.h' 2>/dev/null) | while read -r f; do
    echo "$(basename "$f") ${f%%/*}"
done >>"$tab"
# the generated protobuf-c headers come from proto/
for g in muster.pb-c.h record.pb-c.h; do echo "$g proto" >>"$tab"; done

(cd "$srv" && find . -name '*.[ch]' | sed 's|^\./||') | while read -r f; do
    from=$(folder_of "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$srv/$f" |
    while read -r inc; do
        to=$(awk -v n="$(basename "$inc")" '$1 == n { print $2; exit }' "$tab")
        [ -n "$to" ] && [ "$to" != "$from" ] && echo "$from $to $f $inc"
    done
done | sort -u >"$edges"

echo "folder include graph (folder -> folders it includes):"
for from in $(cut -d' ' -f1 "$edges" | sort -u); do
    echo "  $from -> $(awk -v f="$from" '$1 == f { print $2 }' "$edges" | sort -u | tr '\n' ' ')"
done

echo "cycles between two folders (each edge with the files that make it):"
ncyc=0
for pair in $(cut -d' ' -f1,2 "$edges" | sort -u | tr ' ' ':'); do
    a=${pair%%:*} b=${pair##*:}
    [ "$a" \< "$b" ] || continue
    if awk -v a="$b" -v b="$a" '$1 == a && $2 == b { found = 1 } END { exit !found }' "$edges"; then
        ncyc=$((ncyc + 1))
        echo "  $a <-> $b"
        awk -v a="$a" -v b="$b" '($1 == a && $2 == b) || ($1 == b && $2 == a) {
            printf "      %s includes %s\n", $3, $4 }' "$edges"
    fi
done
[ "$ncyc" -eq 0 ] && echo "  none"

# longer cycles: folders that reach each other through others
echo "folders on a longer cycle (each reaches the other through the graph):"
awk '{ e[$1 " " $2] = 1; n[$1] = 1; n[$2] = 1 }
END {
    for (k in n) for (a in n) for (b in n)
        if (e[a " " k] && e[k " " b]) e[a " " b] = 1
    for (a in n) for (b in n)
        if (a < b && e[a " " b] && e[b " " a]) print "  " a " ~ " b
}' "$edges" | sort >"$tab"
if [ -s "$tab" ]; then
    cat "$tab"
    ncyc=$((ncyc + 1))
else
    echo "  none"
fi

bad=0
if [ "$ncyc" -ne 0 ]; then
    echo "folders include each other in a cycle (see above)" >&2
    bad=1
fi
if awk '$1 == "core" && $2 != "proto" { print $3 " includes " $4 " (" $2 "/)"; found = 1 }
        END { exit !found }' "$edges" >&2; then
    echo "core/ includes a header outside core/ and proto/" >&2
    bad=1
fi
exit $bad
