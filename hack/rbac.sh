#!/usr/bin/env bash
# Generates pitstop's RBAC from the kubebuilder:rbac markers, one set of
# roles per feature, into the Helm chart (charts/pitstop/files/rbac), which
# binds each set only when its feature is on. Each package with markers
# belongs to exactly one feature; hack/rbac_test checks that none is left
# out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
gen=$root/bin/controller-gen
out=charts/pitstop/files/rbac

# feature NAME PACKAGES... writes $out/NAME.yaml.
feature() {
  local name=$1; shift
  local paths
  paths=$(IFS=';'; echo "$*")
  local tmp
  tmp=$(mktemp -d)
  "$gen" rbac:roleName="pitstop-$name" paths="$paths" output:rbac:artifacts:config="$tmp"
  mkdir -p "$out"
  install -m 0644 "$tmp/role.yaml" "$out/$name.yaml"
  rm -rf "$tmp"
}

feature core ./internal/manager ./internal/controller/nodemaintenance ./internal/controller/profile \
  ./internal/plugin/... ./internal/notify ./internal/profilesecret ./internal/budget ./internal/dashboard ./internal/webhookcert
feature machine-api ./internal/machineapi/machine ./internal/machineapi/machineset \
  ./internal/machineapi/nodelink ./internal/machineapi/healthcheck
feature aws-provider ./internal/cloud/aws
feature kwok-provider ./internal/machineapi/provider/kwok
feature medik8s ./internal/controller/medik8s
feature cloud-events ./internal/controller/machinemaintenance
feature cluster-api ./internal/controller/capi
feature smc-compat ./internal/seedmetrics
feature seed-file ./internal/controller/seedfile
