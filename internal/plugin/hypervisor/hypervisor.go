// Package hypervisor reads and writes the Hypervisor objects of the
// OpenStack hypervisor operator (kvm.cloud.sap/v1, cluster-scoped, named
// like their node) for the checkHypervisor and hypervisorCondition checks
// and the alterHypervisor trigger. pitstop does not link the operator's Go
// types: it reads the objects as unstructured data and knows their fields
// by name, so that a profile naming a field the API does not have is
// refused at admission.
package hypervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GVK is the Hypervisor's kind.
var GVK = schema.GroupVersionKind{Group: "kvm.cloud.sap", Version: "v1", Kind: "Hypervisor"}

// Kind is the type of a field's value.
type Kind string

// The kinds of the fields pitstop compares and sets.
const (
	Bool    Kind = "a boolean"
	String  Kind = "a string"
	Number  Kind = "a number"
	Strings Kind = "a list of strings"
)

// StatusFields are the Hypervisor status fields checkHypervisor compares,
// by JSON name.
var StatusFields = map[string]Kind{
	"evicted": Bool, "libVirtVersion": String, "hypervisorVersion": String, "hypervisorId": String,
	"serviceId": String, "internalIp": String, "specHash": String, "numInstances": Number,
	"traits": Strings, "aggregates": Strings,
}

// SpecFields are the Hypervisor spec fields alterHypervisor sets, by JSON
// name.
var SpecFields = map[string]Kind{
	"version": String, "reboot": Bool, "evacuateOnReboot": Bool, "lifecycleEnabled": Bool, "skipTests": Bool,
	"customTraits": Strings, "aggregates": Strings, "allowedProjects": Strings, "highAvailability": Bool,
	"createCertManagerCertificate": Bool, "installCertificate": Bool, "maintenance": String, "maintenanceReason": String,
}

// Parse reads fields against known (StatusFields or SpecFields); plugin
// names the plugin in errors ("checkHypervisor"), part the object's part
// ("status"). Values are bool, string, float64 or []string.
func Parse(plugin, part string, fields map[string]apiextensionsv1.JSON, known map[string]Kind) (map[string]any, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s: name at least one %s field", plugin, part)
	}
	out := make(map[string]any, len(fields))
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		kind, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("%s.%s: not a %s field of a Hypervisor (known: %s)", plugin, name, part, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		v, err := decode(fields[name].Raw, kind)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: want %s, got %s", plugin, name, kind, fields[name].Raw)
		}
		out[name] = v
	}
	return out, nil
}

func decode(raw []byte, kind Kind) (any, error) {
	switch kind {
	case Bool:
		var b bool
		return b, json.Unmarshal(raw, &b)
	case String:
		var s string
		return s, json.Unmarshal(raw, &s)
	case Number:
		var f float64
		return f, json.Unmarshal(raw, &f)
	default:
		var l []string
		err := json.Unmarshal(raw, &l)
		if l == nil {
			l = []string{}
		}
		return l, err
	}
}

// Get reads the Hypervisor of node name.
func Get(ctx context.Context, r client.Reader, name string) (*unstructured.Unstructured, error) {
	hv := &unstructured.Unstructured{}
	hv.SetGroupVersionKind(GVK)
	if err := r.Get(ctx, client.ObjectKey{Name: name}, hv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %s has no Hypervisor (%s)", name, GVK.GroupVersion())
		}
		return nil, fmt.Errorf("reading Hypervisor %s: %w", name, err)
	}
	return hv, nil
}

// Equal says whether the Hypervisor's status field name (read as
// unstructured data; absent is its zero value) is want, and shows it.
func Equal(hv *unstructured.Unstructured, name string, want any) (bool, string) {
	got, _, _ := unstructured.NestedFieldNoCopy(hv.Object, "status", name)
	switch w := want.(type) {
	case bool:
		g, _ := got.(bool)
		return g == w, fmt.Sprint(g)
	case string:
		g, _ := got.(string)
		return g == w, fmt.Sprintf("%q", g)
	case float64:
		var g float64
		switch n := got.(type) {
		case int64:
			g = float64(n)
		case float64:
			g = n
		}
		return g == w || (math.IsNaN(g) && math.IsNaN(w)), fmt.Sprint(g)
	case []string:
		var g []string
		if list, ok := got.([]any); ok {
			for _, e := range list {
				s, _ := e.(string)
				g = append(g, s)
			}
		}
		return slices.Equal(g, w), fmt.Sprintf("%q", g)
	}
	return false, fmt.Sprint(got)
}

// Condition is the status of the Hypervisor's condition typ; Unknown when
// it reports none.
func Condition(hv *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(hv.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			if s, ok := m["status"].(string); ok {
				return s
			}
		}
	}
	return "Unknown"
}

// Patch merges fields into the spec of node name's Hypervisor.
func Patch(ctx context.Context, c client.Client, name string, fields map[string]any) error {
	raw, err := json.Marshal(map[string]any{"spec": fields})
	if err != nil {
		return err
	}
	hv := &unstructured.Unstructured{}
	hv.SetGroupVersionKind(GVK)
	hv.SetName(name)
	if err := c.Patch(ctx, hv, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s has no Hypervisor (%s)", name, GVK.GroupVersion())
		}
		return fmt.Errorf("patching Hypervisor %s: %w", name, err)
	}
	return nil
}
