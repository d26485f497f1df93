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

# The HA overlay: three replicas sharing fences in etcd, no volume, a
# disruption budget that keeps two serving.
kubectl kustomize k8s-ha >"$rendered"
yamllint -c .yamllint "$rendered"
python3 - "$rendered" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
sts = [d for d in docs if d["kind"] == "StatefulSet"]
assert len(sts) == 1, "one StatefulSet"
spec = sts[0]["spec"]
assert spec["replicas"] == 3, spec["replicas"]
assert "volumeClaimTemplates" not in spec, "the HA replicas keep no volume"
container = spec["template"]["spec"]["containers"][0]
assert "volumeMounts" not in container, "the HA replicas mount no volume"
env = {e["name"]: e.get("value") for e in container["env"]}
assert env.get("FENCEPOST_FENCE_STORE", "").startswith("etcd://"), env
assert env.get("FENCEPOST_BACKEND") == "etcd", env
assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
pdb = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
assert len(pdb) == 1 and pdb[0]["spec"]["minAvailable"] == 2, pdb
labels = spec["template"]["metadata"]["labels"]
assert all(labels.get(k) == v
           for k, v in pdb[0]["spec"]["selector"]["matchLabels"].items())
PY
echo "k8s base and HA overlay render, lint and keep their promises"
