// Package clusterapi is pitstop's client side of Cluster API: the keys of
// the runtime-extension-maintenance-controller's protocol (keys.go), the
// connections to workload clusters through their Cluster API kubeconfig
// Secrets, one per cluster while it has opted-in Machines (workload.go),
// and the view of those clusters that the dashboard and `pitstop explain`
// read (view.go). The Secrets and the workload API servers are written by
// the clusters' owners: a kubeconfig that runs a program or reads a local
// file is refused (kubeconfig.go), and no answer of a workload cluster is
// held beyond its bounds (bounds.go). The bridge that acts on Machines is
// internal/controller/capi.
package clusterapi
