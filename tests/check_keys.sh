#!/usr/bin/env bash
# Reserved key names are spelled only in proto/keys.h: no string literal in
# the daemon, the libraries, the CLI, the Python package or the examples may hold one of
# their fragments (comments and docs may name them).
# Usage: check_keys.sh SOURCE_ROOT
set -euo pipefail
root=${1:?source root}
cd "$root"

# Fragments of the names in proto/keys.h, as extended regular expressions.
frag='muster/(rdzv|run|torchrun)|nccl/|/id/|torch/|torch\.rendezvous|/broken|/done'
# A string literal (double or single quoted) holding a fragment.
literal="\"[^\"]*($frag)[^\"]*\"|'[^']*($frag)[^']*'"

files=$(git ls-files -- store-server client proto examples 2>/dev/null || true)
if [ -z "$files" ]; then
    files=$(find store-server client proto examples -type f)
fi
files=$(printf '%s\n' "$files" | grep -E '\.(c|h|py)$' | grep -v '^proto/keys\.h$' | grep -v '/tests/' || true)

status=0
for f in $files; do
    [ -f "$f" ] || continue
    # Drop comment lines (C block-comment bodies and // or # lines) before looking.
    if hits=$(grep -nE "$literal" "$f" | grep -vE '^[0-9]+:[[:space:]]*(\*|/\*|//|#)'); then
        echo "FAIL: $f spells a reserved key name (use proto/keys.h):"
        printf '%s\n' "$hits"
        status=1
    fi
done
n=$(printf '%s\n' "$files" | grep -c . || true)
echo "keys: $n files checked"
exit $status
