#!/usr/bin/env bash
# The README's test command is exactly what CI runs: the last command line of
# .ci/run must appear verbatim as a line of README.md, and the README's demo
# command must name scripts that exist.
# Usage: check_ci.sh SOURCE_ROOT
set -euo pipefail
root=${1:?source root}
ci_cmd=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' -e '^set ' "$root/.ci/run" | tail -n 1)
status=0
if [ -z "$ci_cmd" ]; then
    echo "FAIL: .ci/run has no command"
    exit 1
fi
if ! grep -qxF -- "$ci_cmd" "$root/README.md"; then
    echo "FAIL: .ci/run runs '$ci_cmd', which is not a line of README.md"
    status=1
fi
# Every scripts/*.sh the README's commands name must exist.
while read -r s; do
    [ -f "$root/$s" ] || { echo "FAIL: README names $s, which does not exist"; status=1; }
done < <(grep -o 'scripts/[A-Za-z0-9_.-]*\.sh' "$root/README.md" | sort -u)
echo "ci-command: '$ci_cmd'"
exit $status
