// Package healthcheck runs MachineHealthChecks (machine.openshift.io/v1beta1)
// as OpenShift's machine-api-operator does: it checks the Machines a health
// check selects and their Nodes, reports how many are healthy in the health
// check's status, and remediates an unhealthy Machine by deleting it so that
// its MachineSet creates a new one. It holds back when more Machines are
// unhealthy than maxUnhealthy allows, and, beyond the operator, when a
// Machine's node is in maintenance pitstop planned: a node that is NotReady
// while it reboots is not failing. It must not touch Nodes or instances, nor
// delete a Machine that no MachineSet controls: replacing the Machine is
// the MachineSet's job, and the Machine controller's to drain and release
// what the Machine ran on.
//
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package healthcheck
