#!/usr/bin/env bash
# Writes the one-file installs, rendered from the Helm chart with its CRDs
# and the Namespace (with the Pod Security labels) included, the image
# pinned to this version:
#   dist/pitstop.yaml          the chart's default values;
#   dist/pitstop-medik8s.yaml  the same with medik8sCompat.enabled=true (the
#                              medik8s and kubevirt.io NodeMaintenance CRDs,
#                              their webhook, the medik8s-leases namespace).
# The same chart is what `helm install` uses; test/install checks that they
# agree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p dist
render() {
  "$root/bin/helm" template pitstop charts/pitstop --namespace pitstop-system --include-crds \
    --set namespace.create=true ${IMAGE_TAG:+--set image.tag=$IMAGE_TAG} "$@"
}
out=${OUT:-dist/pitstop.yaml}
out_medik8s=${OUT_MEDIK8S:-dist/pitstop-medik8s.yaml}
render > "$out"
echo "wrote $out"
render --set medik8sCompat.enabled=true > "$out_medik8s"
echo "wrote $out_medik8s"
