//go:build tools

// Package tools pins the helm that `make tools` builds into bin/, in a
// module of its own: helm needs newer Kubernetes libraries than the control
// plane the tests run, and the two must not be resolved together.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
