package machine_test

import (
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// env is a real API server and etcd with pitstop's and the Machine API's
// CRDs. The kwok provider's Nodes have no kubelet here: nodelink (run by
// the manager) links them, and testutil.Kubelet plays the kubelet where
// pods must go.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// startManager runs pitstop's manager with the Machine API on the kwok
// provider.
func startManager(t *testing.T) *clustertest.Manager {
	t.Helper()
	return clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
		o.MachineAPI = true
		o.MachineProviders = []string{"kwok"}
	}})
}

// kwokMachine is a Machine on the kwok provider with the given spec fields
// (JSON object members, e.g. `"deleteDelay": "1s"`).
func kwokMachine(ns, name string, fields string) *machinev1beta1.Machine {
	raw := `{"apiVersion": "pitstop.dev/v1alpha1", "kind": "KwokMachineProviderConfig"`
	if fields != "" {
		raw += ", " + fields
	}
	raw += "}"
	return &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: machinev1beta1.MachineSpec{
			ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(raw)}},
		},
	}
}

func getMachine(t *testing.T, ns, name string) *machinev1beta1.Machine {
	t.Helper()
	m := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// awaitPhase waits until the Machine is in phase and returns it.
func awaitPhase(t *testing.T, ns, name, phase string) *machinev1beta1.Machine {
	t.Helper()
	var m *machinev1beta1.Machine
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		m = &machinev1beta1.Machine{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return err
		}
		if got := ptr.Deref(m.Status.Phase, ""); got != phase {
			return fmt.Errorf("machine %s phase %q, want %q (conditions %+v)", name, got, phase, m.Status.Conditions)
		}
		return nil
	})
	return m
}

// awaitGone waits until the object no longer exists.
func awaitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, 50*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%T %s still exists", obj, obj.GetName())
	})
}

// condition returns the Machine's condition of type t, or a zero one.
func condition(m *machinev1beta1.Machine, t machinev1beta1.ConditionType) machinev1beta1.Condition {
	if c := machineapi.Condition(m.Status.Conditions, t); c != nil {
		return *c
	}
	return machinev1beta1.Condition{}
}
