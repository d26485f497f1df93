#!/usr/bin/env bash
# Checks deploy/prometheus with Debian's promtool: the rules parse, and every
# alert fires in its firing case and stays quiet in its quiet one.
set -euo pipefail
cd "$(dirname "$0")/../../deploy/prometheus"
promtool check rules fencepost-rules.yml
promtool test rules fencepost-rules.test.yml
# Every script the rules file names exists.
for script in $(grep -o 'tests/[A-Za-z0-9_/.-]*\.sh' fencepost-rules.yml); do
  [[ -f ../../$script ]] || { echo "fencepost-rules.yml names $script: missing" >&2; exit 1; }
done
# The Grafana dashboard takes its data source from a variable, not a uid.
python3 - ../grafana/fencepost-dashboard.json <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
variables = {v["name"]: v for v in dashboard["templating"]["list"]}
assert variables.get("datasource", {}).get("type") == "datasource", \
    "no datasource template variable"
def sources(node):
    if isinstance(node, dict):
        if isinstance(node.get("datasource"), dict):
            yield node["datasource"]
        for value in node.values():
            yield from sources(value)
    elif isinstance(node, list):
        for value in node:
            yield from sources(value)
used = list(sources(dashboard))
assert used, "no panel names its data source"
assert all(s.get("uid") == "${datasource}" for s in used), \
    f"hard-coded data sources: {[s for s in used if s.get('uid') != '${datasource}']}"
assert all("datasource" in p for p in dashboard["panels"]), "a panel without the variable"
PY
