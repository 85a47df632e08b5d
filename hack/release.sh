#!/usr/bin/env bash
# Writes dist/pitstop.yaml: the one-file install, rendered from the Helm
# chart with its default values, its CRDs and the Namespace (with the Pod
# Security labels) included, the image pinned to this version. The same
# chart is what `helm install` uses; config/release_test.go checks that the
# two agree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p dist
"$root/bin/helm" template pitstop charts/pitstop --namespace pitstop-system --include-crds \
  --set namespace.create=true ${IMAGE_TAG:+--set image.tag=$IMAGE_TAG} > "${OUT:-dist/pitstop.yaml}"
echo "wrote ${OUT:-dist/pitstop.yaml}"
