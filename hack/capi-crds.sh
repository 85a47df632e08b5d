#!/usr/bin/env bash
# Copies the Cluster API Machine CRD of the release whose API module is
# pinned in go.mod (sigs.k8s.io/cluster-api/api) from the
# sigs.k8s.io/cluster-api module of the same version to
# internal/controller/capi/testdata/crds, so that the Cluster API bridge is tested
# against exactly the schema its Go types come from. pitstop does not
# install Cluster API's CRDs: Cluster API does.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api/api)
dir=$(go mod download -json "sigs.k8s.io/cluster-api@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
out=internal/controller/capi/testdata/crds
mkdir -p "$out"
install -m 0644 "$dir/core/config/crd/bases/cluster.x-k8s.io_machines.yaml" "$out/cluster.x-k8s.io_machines.yaml"
