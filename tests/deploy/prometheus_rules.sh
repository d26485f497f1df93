#!/usr/bin/env bash
# Checks deploy/prometheus with Debian's promtool: the rules parse, and every
# alert fires in its firing case and stays quiet in its quiet one.
set -euo pipefail
cd "$(dirname "$0")/../../deploy/prometheus"
promtool check rules fencepost-rules.yml
promtool test rules fencepost-rules.test.yml
