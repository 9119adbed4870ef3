#!/usr/bin/env bash
# The Kubernetes manifests (docker/kubernetes/): render the base, the ha
# overlay and the training Job example with `kubectl kustomize` (Debian's
# kubernetes-client, scripts/deps.sh --test), then check_kubernetes.py holds
# them against musterd and `muster run` themselves: flags, environment twins,
# PET_* variables, ports, probes, Services, the ServiceMonitor, and each
# musterd command line run for real.  No API server is involved: see
# docs/kubernetes.md for what is and is not tested.
# Exit 77 (skipped) without kubectl (or kustomize) or python3-yaml.
# Usage: test_kubernetes.sh MUSTERD MUSTER SOURCE_ROOT
set -u
musterd=$1
muster=$2
root=$3
here=$(cd "$(dirname "$0")" && pwd)

if command -v kubectl >/dev/null 2>&1; then
    render=(kubectl kustomize)
elif command -v kustomize >/dev/null 2>&1; then
    render=(kustomize build)
else
    echo "SKIP: no kubectl (Debian: kubernetes-client, installed by scripts/deps.sh --test) nor kustomize"
    exit 77
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
    echo "SKIP: python3-yaml is not installed"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "rendering with: ${render[*]} ($("${render[0]}" version --client 2>/dev/null | head -n 2 | tr '\n' ' '))"

files=()
for dir in base overlays/ha examples/train-job; do
    out="$tmp/$(echo "$dir" | tr / -).yaml"
    # Newer kustomize warns about bases/patchesStrategicMerge (kept so kubectl 1.20's kustomize 2.0.3 renders them).
    if ! timeout 60 "${render[@]}" "$root/docker/kubernetes/$dir" >"$out" 2>"$tmp/err"; then
        echo "FAIL: ${render[*]} docker/kubernetes/$dir:"
        cat "$tmp/err"
        exit 1
    fi
    echo "ok   rendered docker/kubernetes/$dir ($(grep -c '^kind:' "$out") objects)"
    files+=("$out")
done

exec timeout 100 python3 "$here/check_kubernetes.py" "$musterd" "$muster" "$root/docs/launcher.md" "${files[@]}"
