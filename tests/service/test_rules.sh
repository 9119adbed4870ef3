#!/usr/bin/env bash
# The Prometheus rules shipped in docker/prometheus/muster-rules.yml: they
# load (promtool check rules, which also lints duplicate series), and every
# alert fires on the series that should fire it and on no others
# (promtool test rules on tests/service/muster-rules.test.yml).
# Usage: test_rules.sh SOURCE_ROOT
set -u
root=$1
. "$(dirname "$0")/../lib.sh"
if ! command -v promtool >/dev/null; then
    echo "SKIP: promtool not installed (Debian package prometheus; scripts/deps.sh --test)"
    exit 77
fi
check "rules load" promtool check rules "$root/docker/prometheus/muster-rules.yml"
check "rules' unit tests pass" promtool test rules "$root/tests/service/muster-rules.test.yml"
check "example prometheus.yml loads" promtool check config "$root/docker/prometheus/prometheus.yml"
echo "rules: $fail failed"
test "$fail" = 0
