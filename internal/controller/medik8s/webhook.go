package medik8s

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// WebhookPath is the medik8s operator's own path for its validating
// webhook, so that a webhook configuration written for that operator
// reaches pitstop unchanged.
const WebhookPath = "/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance"

// The medik8s operator's refusals, word for word: scripts written for it
// look for them.
const (
	ErrorNodeNotExists               = "invalid nodeName, no node with name %s found"
	ErrorNodeMaintenanceExists       = "invalid nodeName, a NodeMaintenance for node %s already exists"
	ErrorControlPlaneQuorumViolation = "can not put master/control-plane node into maintenance at this moment, disrupting node %s will violate etcd quorum"
	ErrorNodeNameUpdateForbidden     = "updating spec.NodeName isn't allowed"
)

// SetupWebhook serves the validating webhooks of both kinds.
func SetupWebhook(mgr ctrl.Manager, allowSingleControlPlane bool) {
	for _, k := range kinds {
		mgr.GetWebhookServer().Register(k.webhookPath, &webhook.Admission{Handler: &validator{kind: k, reader: mgr.GetClient(), live: mgr.GetAPIReader(), allowSingle: allowSingleControlPlane}})
	}
}

// validator refuses at admission what the medik8s operator refuses: a
// maintenance of a node that does not exist, a second one for a node (of
// either kind), one of a control-plane node that would break quorum (on
// any distribution, by pitstop's quorum rule: the Ready control-plane
// nodes, the etcd members where their pods show, and OpenShift's etcd
// guard as that operator reads it), and a change of spec.nodeName. A refused object never exists, so
// it gets no Event.
type validator struct {
	kind kind
	// reader is the manager's cache (nodes, pitstop's maintenances); live
	// reads medik8s objects, which the cache does not hold.
	reader client.Reader
	live   client.Reader
	// allowSingle lets the only control-plane node go into maintenance.
	allowSingle bool
}

func (v *validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj := v.kind.newObject()
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(req.Namespace) // not set yet on a create
	}
	s, err := v.kind.specOf(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	switch req.Operation {
	case admissionv1.Update:
		old := v.kind.newObject()
		if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if o, _ := v.kind.specOf(old); o.NodeName != s.NodeName {
			return admission.Denied(ErrorNodeNameUpdateForbidden)
		}
		return admission.Allowed("")
	case admissionv1.Create:
		return v.create(ctx, obj, s)
	}
	return admission.Allowed("")
}

func (v *validator) create(ctx context.Context, obj *unstructured.Unstructured, s spec) admission.Response {
	node := &corev1.Node{}
	if err := v.reader.Get(ctx, types.NamespacedName{Name: s.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Denied(fmt.Sprintf(ErrorNodeNotExists, s.NodeName))
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not get node for validating spec.NodeName, please try again: %w", err))
	}
	for _, k := range kinds {
		list := k.newList()
		err := v.live.List(ctx, list)
		if meta.IsNoMatchError(err) {
			continue // the kubevirt.io CRD is not installed
		}
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not list NodeMaintenances for validating spec.NodeName, please try again: %w", err))
		}
		for i := range list.Items {
			other := &list.Items[i]
			same := k == v.kind && other.GetNamespace() == obj.GetNamespace() && other.GetName() == obj.GetName()
			if o, err := k.specOf(other); err == nil && o.NodeName == s.NodeName && !same {
				return admission.Denied(fmt.Sprintf(ErrorNodeMaintenanceExists, s.NodeName))
			}
		}
	}
	if !maintenance.IsControlPlane(node) {
		return admission.Allowed("")
	}
	probe := &pitstopv1alpha1.NodeMaintenance{Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: s.NodeName}}
	why, err := maintenance.QuorumRefusal(ctx, v.reader, v.live, probe, v.allowSingle)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not validate master/control-plane quorum, please try again: %w", err))
	}
	if why != "" {
		return admission.Denied(fmt.Sprintf(ErrorControlPlaneQuorumViolation, s.NodeName) + " (" + why + ")")
	}
	return admission.Allowed("")
}
