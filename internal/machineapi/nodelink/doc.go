// Package nodelink ties each Node to the Machine it runs on, as OpenShift's
// nodelink controller does: a Node matches the Machine with the same
// providerID or, failing that, one that shares an internal IP; once each is
// the other's only match the Machine's status.nodeRef names the Node, the
// Node's machine.openshift.io/machine annotation names the Machine, and the
// Machine's spec.metadata labels and annotations and its spec.taints are
// copied onto the Node. It only ever adds: it never removes a label, an
// annotation, a taint or a nodeRef, never creates or deletes a Node or a
// Machine, and writes Nodes through patches only (those that change the
// taint list with an optimistic lock, so a taint added by someone else at
// the same moment is never lost).
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package nodelink
