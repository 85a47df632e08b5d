#!/usr/bin/env bash
# Copies the generated CRDs into the Helm chart: pitstop's own into crds/
# (Helm installs them before anything else), the Machine API's into files/
# (installed only with machineAPI.installCRDs), and the medik8s
# NodeMaintenance CRD pitstop ships into files/ (installed with
# medik8sCompat.enabled and medik8sCompat.installCRD).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
chart=charts/pitstop
mkdir -p "$chart/crds" "$chart/files/crds"
rm -f "$chart"/crds/*.yaml "$chart"/files/crds/*.yaml
install -m 0644 config/crd/bases/*.yaml "$chart/crds/"
install -m 0644 config/crd/machineapi/machine.openshift.io_*.yaml "$chart/files/crds/"
install -m 0644 config/crd/medik8s/*.yaml "$chart/files/crds/"
