// Package install tests pitstop as users install it: the Helm chart
// (charts/pitstop) rendered over a matrix of values, the one-file release
// rendered from it, the RBAC it grants held to an allowlist, and the
// rendered objects applied to a real API server with the manager running
// as the chart's ServiceAccount.
package install
