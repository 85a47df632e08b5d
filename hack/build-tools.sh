#!/usr/bin/env bash
# Builds the pinned tools of hack/tools/go.mod into bin/ from the Go module
# proxy, skipping every tool already built at the pinned version. A cold
# build takes about 5 minutes on 2 cores; a warm check takes about a second.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
tools="$root/hack/tools"
mkdir -p "$bin"
cd "$tools"

# version MODULE prints the version of MODULE that hack/tools/go.mod pins.
version() { go list -m -f '{{.Version}}' "$1"; }

kube=$(version k8s.io/kubernetes)
kube_minor=$(echo "$kube" | cut -d. -f2)
# Without these the binaries report v0.0.0-master+$Format:%H$, which clients
# that check the server version cannot parse.
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$kube_minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.gitCommit=0000000000000000000000000000000000000000 \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

# want NAME says whether NAME was asked for: every tool when the script has
# no arguments, else only those it names (`hack/build-tools.sh helm`).
want() { (($# == 1)) && { ((${#only[@]} == 0)) || [[ " ${only[*]} " == *" $1 "* ]]; }; }
only=("$@")

# current NAME STAMP says whether bin/NAME exists and was built as STAMP.
current() { [[ -x "$bin/$1" && -f "$bin/.$1.version" && "$(cat "$bin/.$1.version")" == "$2" ]]; }
# stamp NAME STAMP records what bin/NAME was built as.
stamp() { echo "$2" > "$bin/.$1.version"; }

# The Kubernetes binaries are built in one go command so they share the
# compilation of their common packages. kubelet and kube-proxy run the local
# cluster's real node; on top of the others they add about 40 s cold.
kube_pkgs=()
kube_names=()
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
  if want "$name" && ! current "$name" "k8s.io/kubernetes@$kube"; then
    kube_pkgs+=("k8s.io/kubernetes/cmd/$name")
    kube_names+=("$name")
  fi
done
if ((${#kube_pkgs[@]})); then
  echo "building ${kube_names[*]} $kube (cold: about 4 minutes)"
  go build -ldflags "$kube_ldflags" -o "$bin/" "${kube_pkgs[@]}"
  for name in "${kube_names[@]}"; do stamp "$name" "k8s.io/kubernetes@$kube"; done
fi

# build NAME MODULE PACKAGE builds one binary unless it is current.
build() {
  local name=$1 module=$2 pkg=$3 v
  want "$name" || return 0
  v=$(version "$module")
  current "$name" "$module@$v" && return 0
  echo "building $name $v"
  go build -o "$bin/$name" "$pkg"
  stamp "$name" "$module@$v"
}
build etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3
build kwok sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok
build controller-gen sigs.k8s.io/controller-tools sigs.k8s.io/controller-tools/cmd/controller-gen

# helm lives in a module of its own (hack/helm): it needs newer Kubernetes
# libraries than the control plane above.
helm_v=$(cd "$root/hack/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
if want helm && ! current helm "helm.sh/helm/v3@$helm_v"; then
  echo "building helm $helm_v (cold: about 2 minutes)"
  (cd "$root/hack/helm" && go build -ldflags "-X helm.sh/helm/v3/internal/version.version=$helm_v" -o "$bin/helm" helm.sh/helm/v3/cmd/helm)
  stamp helm "helm.sh/helm/v3@$helm_v"
fi

# Cluster API's core manager lives in a module of its own (hack/capi): the
# Cluster API end-to-end test runs it as the real Machine controller, with
# its CRDs (bin/cluster-api-crds).
capi_v=$(cd "$root/hack/capi" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
if want cluster-api-manager && ! current cluster-api-manager "sigs.k8s.io/cluster-api@$capi_v"; then
  echo "building cluster-api-manager $capi_v (cold: about 2 minutes)"
  (cd "$root/hack/capi" && go build -o "$bin/cluster-api-manager" sigs.k8s.io/cluster-api/core)
  capi_dir=$(cd "$root/hack/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
  rm -rf "$bin/cluster-api-crds"
  mkdir -p "$bin/cluster-api-crds"
  install -m 0644 "$capi_dir"/core/config/crd/bases/*.yaml "$bin/cluster-api-crds/"
  stamp cluster-api-manager "sigs.k8s.io/cluster-api@$capi_v"
fi

# kwok refuses to start without stages. They ship in the kwok module: a node
# becomes Ready and keeps its lease, pods become Running, complete, and are
# finalized when deleted. kwok wants them as one multi-document file.
want kwok || exit 0
kwok_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
stages_stamp="sigs.k8s.io/kwok@$(version sigs.k8s.io/kwok)"
if ! [[ -f "$bin/kwok-stages.yaml" && -f "$bin/.kwok-stages.yaml.version" && "$(cat "$bin/.kwok-stages.yaml.version")" == "$stages_stamp" ]]; then
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"
      cat "$kwok_dir/kustomize/stage/$f"
    done
  } > "$bin/kwok-stages.yaml"
  stamp kwok-stages.yaml "$stages_stamp"
fi
