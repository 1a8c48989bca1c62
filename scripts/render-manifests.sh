#!/usr/bin/env bash
# Regenerates the kustomize bases deploy/kubernetes/<component>/ from the
# Helm chart charts/liqo-broker (with deploy/kubernetes/bases.yaml's
# values), with the helm scripts/install-test-deps.sh installs. Run it after
# editing the chart; deploy-check fails while a base is not the chart's
# rendering. Arguments go to `deploy-check render-bases` (--help).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet -p deploy-check -- render-bases "$@"
