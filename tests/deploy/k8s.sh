#!/usr/bin/env bash
# Renders deploy/k8s with `kubectl kustomize` (Debian's kubernetes-client),
# lints every YAML file under deploy/ and the rendered output with yamllint,
# and checks what the base promises: one replica with a RWO volume, probes on
# /livez and /readyz, a non-root user, a read-only root file system, a
# Service, a ServiceMonitor that selects it, and a NetworkPolicy that opens
# the admin port only to the monitoring namespace's Prometheus.
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
expect "kind: NetworkPolicy"
# The ServiceMonitor selects the Service by a label the Service carries, and
# the NetworkPolicy admits the admin port only from the monitoring peers.
python3 - "$rendered" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def one(kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]
service, monitor = one("Service"), one("ServiceMonitor")
selector = monitor["spec"].get("selector", {}).get("matchLabels")
assert selector, "the ServiceMonitor has no spec.selector.matchLabels"
labels = service["metadata"].get("labels", {})
assert all(labels.get(k) == v for k, v in selector.items()), \
    f"the ServiceMonitor's selector {selector} misses the Service {labels}"
policy = one("NetworkPolicy")["spec"]
pod_labels = one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
assert all(pod_labels.get(k) == v
           for k, v in policy["podSelector"]["matchLabels"].items()), \
    "the NetworkPolicy does not select fencepost's pod"
assert policy["policyTypes"] == ["Ingress"]
for rule in policy["ingress"]:
    ports = {p["port"] for p in rule["ports"]}
    if "admin" in ports:
        peers = rule.get("from", [])
        assert peers and all("namespaceSelector" in p and "podSelector" in p
                             for p in peers), \
            "the admin port is open beyond the monitoring peers"
    else:
        assert ports == {"data"}, f"unexpected open ports {ports}"
assert any("admin" in {p["port"] for p in r["ports"]} for r in policy["ingress"]), \
    "Prometheus cannot reach the admin port"
PY
echo "k8s base renders, lints and keeps its promises"
