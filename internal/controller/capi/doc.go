// Package capi is the Cluster API bridge. Run in a management cluster
// (--cluster-api), it speaks the runtime-extension-maintenance-controller's
// protocol between each opted-in Cluster API Machine and its Node in the
// workload cluster: it holds Cluster API's drain and deletion of the
// Machine with a pre-drain hook until the workload Node approves, carries
// maintenance requests and approvals between the two, and (--metal3)
// reboots the Machine's BareMetalHost once its maintenance is approved.
// The workload clusters are reached through internal/cloud/clusterapi,
// which holds the protocol's keys and the connections. The Machines'
// providerIDs are written by the clusters' owners: the bridge must never
// reboot a BareMetalHost that is not the Machine's own.
package capi
