#!/usr/bin/env bash
# Renders deploy/k8s with `kubectl kustomize` (Debian's kubernetes-client),
# lints every YAML file under deploy/ and the rendered output with yamllint,
# and checks what the base promises: one replica with a RWO volume, probes on
# /livez and /readyz, a non-root user, a read-only root file system, a
# Service and a ServiceMonitor.
set -euo pipefail
cd "$(dirname "$0")/../../deploy"
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
kubectl kustomize k8s >"$rendered"
yamllint -c .yamllint . "$rendered"
expect() {
  grep -q -- "$1" "$rendered" || { echo "rendered base lacks: $1" >&2; exit 1; }
}
expect "kind: StatefulSet"
expect "replicas: 1"
expect "ReadWriteOnce"
expect "path: /livez"
expect "path: /readyz"
expect "runAsNonRoot: true"
expect "readOnlyRootFilesystem: true"
expect "kind: Service$"
expect "kind: ServiceMonitor"
echo "k8s base renders, lints and keeps its promises"
