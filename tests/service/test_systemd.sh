#!/usr/bin/env bash
# The systemd unit and its environment file: `systemd-analyze verify` finds
# nothing to say about the unit (run against this build's musterd), and
# every setting of the example environment file is one musterd accepts.
# Usage: test_systemd.sh MUSTERD SOURCE_ROOT.  Skips (77) without systemd-analyze.
set -u
musterd=$(realpath "$1")
root=$2
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze not installed"
    exit 77
fi
. "$(dirname "$0")/../lib.sh"
scratch

sed "s|^ExecStart=/usr/local/bin/musterd|ExecStart=$musterd|" "$root/scripts/systemd/musterd.service" \
    >"$tmp/musterd.service"
timeout 60 systemd-analyze verify "$tmp/musterd.service" >"$tmp/verify.out" 2>&1
rc=$?
check "systemd-analyze verify exits 0" test "$rc" = 0
# It reports unknown keys and bad values on stderr but still exits 0: any output is a finding.
check "systemd-analyze verify has nothing to say" test ! -s "$tmp/verify.out"
cat "$tmp/verify.out"
check "unit is Type=notify" grep -q '^Type=notify$' "$tmp/musterd.service"
check "unit uses a StateDirectory for the data" grep -q '^StateDirectory=muster$' "$tmp/musterd.service"

# The environment file: every MUSTER_* name it sets is a real option, and the values parse.
(
    set -a
    # shellcheck disable=SC1091
    . "$root/scripts/systemd/musterd.env"
    MUSTER_DATA_DIR=$tmp/data
    timeout 10 "$musterd" --print-config
) >"$tmp/config.out" 2>&1
rc=$?
check "musterd accepts the example environment file" test "$rc" = 0
check "environment file values take effect" grep -q '^fsync=always  # env$' "$tmp/config.out"
for name in $(grep -o '^MUSTER_[A-Z_]*' "$root/scripts/systemd/musterd.env"); do
    check "$name is an option" grep -q -- "$name" <("$musterd" --help)
done
echo "systemd: $fail failed"
test "$fail" = 0
