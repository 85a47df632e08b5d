#!/usr/bin/env bash
# Installs the system packages the build needs when they are missing: gcc,
# because `go test -race` needs cgo, prometheus, which the tests of the
# prometheusInstant check query, chromium, in which test/browser reads
# the dashboard (at /usr/bin/chromium, where the test looks for it), and
# podman with runc, with which internal/release/image loads and runs the
# release image (runc, because crun refuses hybrid cgroup hosts), and
# containerd with the CNI plugins, iproute2 and iptables, with which
# internal/localcluster runs a real node. Only Debian's packages are
# reachable.
set -euo pipefail
missing=()
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
command -v prometheus >/dev/null || missing+=(prometheus)
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v containerd >/dev/null || missing+=(containerd)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v ip >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "missing ${missing[*]}: install them (Debian: apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
