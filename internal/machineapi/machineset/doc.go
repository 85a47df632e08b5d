// Package machineset keeps the number of Machines a MachineSet
// (machine.openshift.io/v1beta1) asks for, as OpenShift's machine-api-operator
// does: it creates Machines from the set's template, adopts orphan Machines
// that match its selector and releases those that stop matching, picks which
// Machines go first when the set scales down (spec.deletePolicy and the
// delete-machine annotation), and reports replicas, fully labelled, ready and
// available counts in the set's status. It never acts twice on a view of
// Machines that does not yet show its last creations and deletions. It must
// not drain nodes, touch instances or remove finalizers: deleting a Machine
// is a Delete of the object, and the Machine controller does the rest.
//
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets,verbs=get;list;watch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets/finalizers,verbs=update
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package machineset
