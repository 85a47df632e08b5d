package machineset

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
)

// controllerName names the controller in logs, metrics and Events.
const controllerName = "machineset"

// Options configure the MachineSet controller.
type Options struct {
	// Clock tells the time for spec.minReadySeconds and for how long the
	// controller waits for its cache; nil is the real clock.
	Clock clock.PassiveClock
}

// Setup registers the MachineSet controller with the manager. It watches
// MachineSets, their Machines (and orphans their selectors match), and the
// Nodes of those Machines, so that readyReplicas follows node readiness.
func Setup(mgr ctrl.Manager, opts Options) error {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	exp := newExpectations(clk)
	r := &Reconciler{
		client:       mgr.GetClient(),
		apiReader:    mgr.GetAPIReader(),
		recorder:     mgr.GetEventRecorder("pitstop-" + controllerName),
		clock:        clk,
		expectations: exp,
	}
	machines := &machineHandler{reader: mgr.GetClient(), expectations: exp}
	nodes := &nodeHandler{reader: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&machinev1beta1.MachineSet{}).
		WatchesRawSource(source.Kind(mgr.GetCache(), &machinev1beta1.Machine{}, machines.funcs())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, nodes.funcs())).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(r)
}
