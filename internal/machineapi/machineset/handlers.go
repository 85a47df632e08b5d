package machineset

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// machineHandler maps Machine events to the MachineSets that care, and
// tells the expectations what the cache now shows.
type machineHandler struct {
	reader       client.Reader
	expectations *expectations
}

func (h *machineHandler) funcs() handler.TypedEventHandler[*machinev1beta1.Machine, reconcile.Request] {
	return handler.TypedFuncs[*machinev1beta1.Machine, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*machinev1beta1.Machine], q queue) {
			h.observe(ctx, e.Object, true, false)
			h.enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*machinev1beta1.Machine], q queue) {
			h.observe(ctx, e.ObjectNew, false, false)
			if !equality.Semantic.DeepEqual(metav1.GetControllerOf(e.ObjectOld), metav1.GetControllerOf(e.ObjectNew)) {
				h.enqueue(ctx, e.ObjectOld, q) // the old owner lost it
			}
			h.enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*machinev1beta1.Machine], q queue) {
			h.observe(ctx, e.Object, false, true)
			h.enqueue(ctx, e.Object, q)
		},
	}
}

// observe marks, in the expectations of the Machine's MachineSet, its
// creation as seen (created) and its deletion as seen (deleted, or a
// deletionTimestamp: the Machine controller may take long to drain it, and
// the set counts it as going from then on).
func (h *machineHandler) observe(ctx context.Context, m *machinev1beta1.Machine, created, deleted bool) {
	key, ok := controllingSet(m)
	if !ok {
		return
	}
	// A Machine of an earlier set of the same name is not one this set
	// created or deleted.
	ms := &machinev1beta1.MachineSet{}
	if err := h.reader.Get(ctx, key, ms); err != nil || metav1.GetControllerOf(m).UID != ms.UID {
		return
	}
	if created {
		h.expectations.creationObserved(key)
	}
	if deleted || !m.DeletionTimestamp.IsZero() {
		h.expectations.deletionObserved(key, m.UID)
	}
}

// enqueue wakes the Machine's MachineSet, or, for an orphan, every
// MachineSet of its namespace whose selector matches it: one may adopt it.
func (h *machineHandler) enqueue(ctx context.Context, m *machinev1beta1.Machine, q queue) {
	if key, ok := controllingSet(m); ok {
		q.Add(reconcile.Request{NamespacedName: key})
		return
	}
	if metav1.GetControllerOf(m) != nil {
		return // another kind of controller owns it
	}
	sets := &machinev1beta1.MachineSetList{}
	if err := h.reader.List(ctx, sets, client.InNamespace(m.Namespace)); err != nil {
		return // the cache lists from memory; it only fails before it started
	}
	for i := range sets.Items {
		ms := &sets.Items[i]
		selector, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
		if err == nil && !selector.Empty() && selector.Matches(labels.Set(m.Labels)) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
		}
	}
}

// controllingSet returns the MachineSet named by the Machine's controller
// owner reference, if that is a MachineSet.
func controllingSet(m *machinev1beta1.Machine) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(m)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return types.NamespacedName{}, false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != controllerKind.Group {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}, true
}

// nodeHandler maps Node events to the MachineSet of the Node's Machine,
// found through the machine.openshift.io/machine annotation, when the
// Node's readiness may have changed.
type nodeHandler struct {
	reader client.Reader
}

func (h *nodeHandler) funcs() handler.TypedEventHandler[*corev1.Node, reconcile.Request] {
	return handler.TypedFuncs[*corev1.Node, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*corev1.Node], q queue) {
			h.enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Node], q queue) {
			oldMachine, newMachine := e.ObjectOld.Annotations[machineapi.AnnotationMachine], e.ObjectNew.Annotations[machineapi.AnnotationMachine]
			if oldMachine != newMachine {
				h.enqueue(ctx, e.ObjectOld, q)
				h.enqueue(ctx, e.ObjectNew, q)
				return
			}
			// Kubelets update their Node often (heartbeats, images); only
			// readiness matters here.
			if readyOf(e.ObjectOld) != readyOf(e.ObjectNew) {
				h.enqueue(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Node], q queue) {
			h.enqueue(ctx, e.Object, q)
		},
	}
}

func (h *nodeHandler) enqueue(ctx context.Context, node *corev1.Node, q queue) {
	ns, name, err := cache.SplitMetaNamespaceKey(node.Annotations[machineapi.AnnotationMachine])
	if err != nil || ns == "" || name == "" {
		return
	}
	m := &machinev1beta1.Machine{}
	if err := h.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
		return // not in the cache: not a Machine this manager watches
	}
	if key, ok := controllingSet(m); ok {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// readiness is what of a Node's Ready condition the counts depend on.
type readiness struct {
	status corev1.ConditionStatus
	since  int64 // Unix seconds, the API's precision
}

func readyOf(node *corev1.Node) readiness {
	if c := nodeview.Condition(node, corev1.NodeReady); c != nil {
		return readiness{c.Status, c.LastTransitionTime.Unix()}
	}
	return readiness{}
}
