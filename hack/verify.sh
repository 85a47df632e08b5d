#!/usr/bin/env bash
# Fails when the tree is stale: generated code or manifests that do not match
# api/ and the kubebuilder markers, unformatted Go, or an untidy go.mod.
# Generated files are regenerated in place, so after a failure the tree holds
# the right content and only needs committing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

generated() { find api config/crd/bases config/crd/machineapi charts/pitstop/crds charts/pitstop/files -type f \( -name 'zz_generated*.go' -o -name '*.yaml' -o -name '*.json' \) -print0 | sort -z | xargs -0 sha256sum; }
before=$(generated)
make --no-print-directory -s manifests >/dev/null
after=$(generated)
status=0
if [[ "$before" != "$after" ]]; then
  echo "generated files were stale (now regenerated; commit them):" >&2
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  status=1
fi

unformatted=$(git ls-files --cached --others --exclude-standard '*.go' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done | xargs gofmt -l)
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" | sed 's/^/  /' >&2
  status=1
fi

for mod in . hack/tools hack/helm hack/capi; do
  if ! (cd "$mod" && go mod tidy -diff >/dev/null); then
    echo "go.mod in $mod is not tidy: run (cd $mod && go mod tidy)" >&2
    status=1
  fi
done
exit $status
