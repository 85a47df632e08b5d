#!/usr/bin/env bash
# Copies the Machine API CRDs (machine.openshift.io/v1beta1 Machine,
# MachineSet, MachineHealthCheck; the Default feature set) from the
# github.com/openshift/api module pinned in go.mod to config/crd/machineapi,
# so that clusters without OpenShift can install them and the tests run
# against exactly the schema the Go types come from.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=$(go list -m -f '{{.Dir}}' github.com/openshift/api)
if [[ -z "$dir" ]]; then
  go mod download github.com/openshift/api
  dir=$(go list -m -f '{{.Dir}}' github.com/openshift/api)
fi
src="$dir/machine/v1beta1/zz_generated.crd-manifests"
out=config/crd/machineapi
mkdir -p "$out"
for f in machines-Default machinesets-Default machinehealthchecks; do
  name=${f%-Default}
  install -m 0644 "$src/0000_10_machine-api_01_$f.crd.yaml" "$out/machine.openshift.io_$name.yaml"
done
