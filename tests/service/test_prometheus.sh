#!/usr/bin/env bash
# A real Prometheus (Debian's prometheus, on a loopback port, scraping every
# second) scrapes a real musterd's --metrics-listen with the shipped rules
# loaded: the target is up, the recording rules give numbers from real
# series, no alert fires for a healthy job, and MusterJobGenerationBroken
# fires for that job (namespace label) once one of its two `muster run`
# nodes is SIGKILLed and its generation breaks.  Bounded: 90 s in all.
# Usage: test_prometheus.sh MUSTERD MUSTER SOURCE_ROOT
set -u
musterd=$1
muster=$2
root=$3
. "$(dirname "$0")/../lib.sh"
if ! command -v prometheus >/dev/null; then
    echo "SKIP: prometheus not installed (Debian package prometheus; scripts/deps.sh --test)"
    exit 77
fi
scratch
prom= node_a= node_b=
# Stop what the test started: Prometheus, both nodes' process groups, musterd (scratch's trap).
cleanup() {
    local p
    for p in $node_a $node_b; do kill -KILL -- "-$p" 2>/dev/null; done
    if [ -n "$prom" ]; then kill "$prom" 2>/dev/null && wait "$prom" 2>/dev/null; fi
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
deadline=$((SECONDS + 90))

"$musterd" --listen 127.0.0.1:0 --port-file "$tmp/port" --metrics-listen 127.0.0.1:0 \
    --metrics-port-file "$tmp/mport" 2>"$tmp/musterd.log" &
pid=$!
await_file "$tmp/port" && await_file "$tmp/mport"
check "musterd started" test -s "$tmp/mport"

# A free loopback port for Prometheus's own listener (it cannot report one it picked).
pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $root/docker/prometheus/muster-rules.yml
scrape_configs:
  - job_name: muster
    static_configs:
      - targets: ["127.0.0.1:$(cat "$tmp/mport")"]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn 2>"$tmp/prometheus.log" &
prom=$!

# query PROMQL: print each result's labels and value as "k=v,k=v value" lines (nothing on error).
query() {
    python3 - "$pport" "$1" <<'PY' 2>/dev/null
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
for r in json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]:
    print(",".join("%s=%s" % kv for kv in sorted(r["metric"].items())), r["value"][1])
PY
}
# alerts: print each active alert as "NAME namespace=NS STATE".
alerts() {
    python3 - "$pport" <<'PY' 2>/dev/null
import json, sys, urllib.request
url = "http://127.0.0.1:%s/api/v1/alerts" % sys.argv[1]
for a in json.load(urllib.request.urlopen(url, timeout=5))["data"]["alerts"]:
    print(a["labels"]["alertname"], "namespace=%s" % a["labels"].get("namespace", ""), a["state"])
PY
}
# until SECONDS CMD...: run CMD every 0.5 s until it succeeds, at most SECONDS (and never past the deadline).
until_ok() {
    local end=$((SECONDS + $1))
    shift
    [ "$end" -gt "$deadline" ] && end=$deadline
    while [ "$SECONDS" -lt "$end" ]; do
        "$@" && return 0
        sleep 0.5
    done
    "$@"
}
target_up() { query 'up{job="muster"}' | grep -q ' 1$'; }
job_running() { query 'muster_rdzv_running{namespace="job1"}' | grep -q ' 1$'; }
broken_firing() { alerts | grep -q '^MusterJobGenerationBroken namespace=job1 firing$'; }

check "prometheus scrapes musterd (up == 1)" until_ok 30 target_up

# Two nodes of job1, each `muster run` in its own process group (its worker with it).
export MUSTER_URL="tcp://127.0.0.1:$(cat "$tmp/port")"
setsid "$muster" run --nnodes 2 --rdzv-id job1 --node-id a --last-call 0 --rdzv-timeout 60 sleep 80 \
    >"$tmp/node_a.log" 2>&1 &
node_a=$!
setsid "$muster" run --nnodes 2 --rdzv-id job1 --node-id b --last-call 0 --rdzv-timeout 60 sleep 80 \
    >"$tmp/node_b.log" 2>&1 &
node_b=$!
check "job1 formed and Prometheus saw it running" until_ok 30 job_running
check "generation 1 recorded" grep -q ' 1$' <<<"$(query 'muster_rdzv_generation{namespace="job1"}')"
check "muster_rdzv_members is 2" grep -q ' 2$' <<<"$(query 'muster_rdzv_members{namespace="job1"}')"
# A rule evaluation on real series: connections over their bound (2 of 10000).
check "recording rule muster:limit_usage:ratio has the connections ratio" \
    until_ok 10 bash -c "$(declare -f query); pport=$pport; query 'muster:limit_usage:ratio{limit=\"connections\"} > 0' | grep -q limit=connections"
check "no alert while the job is healthy" test -z "$(alerts)"

kill -KILL -- "-$node_b"
{ wait "$node_b"; } 2>/dev/null
node_b=
check "MusterJobGenerationBroken fires for job1 after a node is killed" until_ok 40 broken_firing
check "muster_rdzv_failures_total is 1" grep -q ' 1$' <<<"$(query 'muster_rdzv_failures_total{namespace="job1"}')"

if [ "$fail" != 0 ]; then
    echo "--- alerts"; alerts
    echo "--- musterd"; tail -20 "$tmp/musterd.log"
    echo "--- prometheus"; tail -20 "$tmp/prometheus.log"
    echo "--- node a"; tail -5 "$tmp/node_a.log"
fi
echo "prometheus: $fail failed"
test "$fail" = 0
