package machineset

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewMachine exports newMachine: a Machine of the set's template.
var NewMachine = newMachine

// MachinesToDelete exports machinesToDelete: the Machines a set with n
// too many removes, in order.
var MachinesToDelete = machinesToDelete

// TestReconciler is a Reconciler working through a client of the test's
// choice, and its expectations.
type TestReconciler struct {
	*Reconciler
}

// NewTestReconciler returns a Reconciler that reads and writes through c.
func NewTestReconciler(c client.Client) TestReconciler {
	return TestReconciler{&Reconciler{
		client:       c,
		apiReader:    c,
		recorder:     events.NewFakeRecorder(100),
		clock:        clock.RealClock{},
		expectations: newExpectations(clock.RealClock{}),
	}}
}

// ExpectCreations records that the set created n Machines whose events
// have not arrived.
func (r TestReconciler) ExpectCreations(ms *machinev1beta1.MachineSet, n int) {
	r.expectations.expectCreations(types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}, n)
}

// CreationObserved records that the event of one of the set's creations
// arrived.
func (r TestReconciler) CreationObserved(ms *machinev1beta1.MachineSet) {
	r.expectations.creationObserved(types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name})
}
