package medik8s

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
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

// SetupWebhook serves the medik8s NodeMaintenance validating webhook.
func SetupWebhook(mgr ctrl.Manager) {
	mgr.GetWebhookServer().Register(WebhookPath, &webhook.Admission{Handler: &validator{reader: mgr.GetClient(), live: mgr.GetAPIReader()}})
}

// validator refuses at admission what the medik8s operator refuses: a
// maintenance of a node that does not exist, a second one for a node, one
// of a control-plane node that would break quorum (on any distribution:
// pitstop's quorum guard counts Ready control-plane nodes), and a change
// of spec.nodeName. A refused object never exists, so it gets no Event.
type validator struct {
	// reader is the manager's cache (nodes, pitstop's maintenances); live
	// reads medik8s objects, which the cache does not hold.
	reader client.Reader
	live   client.Reader
}

func (v *validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj := newObject()
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	s, err := specOf(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	switch req.Operation {
	case admissionv1.Update:
		old := newObject()
		if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if o, _ := specOf(old); o.NodeName != s.NodeName {
			return admission.Denied(ErrorNodeNameUpdateForbidden)
		}
		return admission.Allowed("")
	case admissionv1.Create:
		return v.create(ctx, obj.GetName(), s)
	}
	return admission.Allowed("")
}

func (v *validator) create(ctx context.Context, name string, s spec) admission.Response {
	node := &corev1.Node{}
	if err := v.reader.Get(ctx, types.NamespacedName{Name: s.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Denied(fmt.Sprintf(ErrorNodeNotExists, s.NodeName))
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not get node for validating spec.NodeName, please try again: %w", err))
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GroupVersionKind.GroupVersion().WithKind(GroupVersionKind.Kind + "List"))
	if err := v.live.List(ctx, list); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not list NodeMaintenances for validating spec.NodeName, please try again: %w", err))
	}
	for i := range list.Items {
		if o, err := specOf(&list.Items[i]); err == nil && o.NodeName == s.NodeName && list.Items[i].GetName() != name {
			return admission.Denied(fmt.Sprintf(ErrorNodeMaintenanceExists, s.NodeName))
		}
	}
	why, err := nodemaintenance.QuorumRefusal(ctx, v.reader, node)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("could not validate master/control-plane quorum, please try again: %w", err))
	}
	if why != "" {
		return admission.Denied(fmt.Sprintf(ErrorControlPlaneQuorumViolation, s.NodeName) + " (" + why + ")")
	}
	return admission.Allowed("")
}
