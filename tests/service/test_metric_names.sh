#!/usr/bin/env bash
# Every metric the shipped Grafana dashboard (docker/grafana/muster-dashboard.json)
# and Prometheus rules (docker/prometheus/muster-rules.yml) read is one a real
# musterd exports: each muster_* name is in the /metrics of a daemon started
# here (a family's HELP/TYPE lines are there before any sample), or, for a
# series only some daemons export (muster_ha_leader needs --ha), is a name
# store-server/metrics.c writes; each muster:* series the dashboard reads is
# recorded by the rules.  A renamed metric fails here.  Grafana is not
# packaged for Debian, so the dashboard is checked as JSON, not loaded.
# Usage: test_metric_names.sh MUSTERD SOURCE_ROOT
set -u
musterd=$1
root=$2
. "$(dirname "$0")/../lib.sh"
scratch
dash=$root/docker/grafana/muster-dashboard.json
rules=$root/docker/prometheus/muster-rules.yml

"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" --metrics-listen 127.0.0.1:0 \
    --metrics-port-file "$tmp/mport" 2>"$tmp/log" &
pid=$!
await_file "$tmp/port" && await_file "$tmp/mport"
check "musterd started" test -s "$tmp/mport"
python3 - "$(cat "$tmp/mport")" >"$tmp/exported" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
names = set()
for line in body.splitlines():
    parts = line.split()
    if line.startswith("# TYPE ") and len(parts) >= 4:
        names.add(parts[2])
        if parts[3] == "histogram":
            names.update(parts[2] + s for s in ("_bucket", "_sum", "_count"))
    elif parts and not line.startswith("#"):
        names.add(parts[0].split("{")[0])
print("\n".join(sorted(names)))
PY
check "scrape lists over 80 names" test "$(wc -l <"$tmp/exported")" -gt 80
check "dashboard is JSON" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dash"

# known NAME: 0 when musterd exports NAME or metrics.c writes it as a name ("NAME" or "NAME{" or "NAME ").
known() {
    grep -qx "$1" "$tmp/exported" || grep -qE "\"$1([\"{ ]|\\\\n)" "$root/store-server/metrics.c"
}
# unknown NAME: the opposite, so the check below is seen to refuse something.
unknown() { ! known "$1"; }
check "the check itself refuses a name nobody exports" unknown muster_rdzv_generations_formed
check "the check itself refuses a prefix of a name" unknown muster_ha_lead

grep -ohE 'muster_[a-z0-9_]+' "$dash" "$rules" | sort -u >"$tmp/used"
check "the dashboard and rules read at least 30 muster_* names" test "$(wc -l <"$tmp/used")" -ge 30
while read -r name; do
    check "$name is exported" known "$name"
done <"$tmp/used"

grep -ohE 'record: *muster:[a-z0-9_:]+' "$rules" | sed 's/record: *//' | sort -u >"$tmp/recorded"
for name in $(grep -ohE 'muster:[a-z0-9_:]+' "$dash" "$rules" | sort -u); do
    check "$name is recorded by the rules" grep -qx "$name" "$tmp/recorded"
done
for alert in $(grep -ohE 'alert: *[A-Za-z]+' "$rules" | sed 's/alert: *//'); do
    check "alert $alert has a unit test" grep -q "alertname: $alert\$" "$root/tests/service/muster-rules.test.yml"
done

echo "metric names: $fail failed"
test "$fail" = 0
