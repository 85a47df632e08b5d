//go:build tools

// Package capi pins Cluster API's core manager, which the Cluster API
// end-to-end test runs as the real Machine controller. It is a module of
// its own so that its dependencies never move those of the control plane
// in hack/tools.
package capi

import (
	_ "sigs.k8s.io/cluster-api/core"
)
