package nodemaintenance_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestEachPodTheDrainEvictsIsNamedInAnEvent: as the maintenance-controller
// and the medik8s operator report each pod, a drain says of each pod it
// evicts, in an Event PodEvicted on the NodeMaintenance whose related
// object is the pod; the Events are paced over every drain, so that past
// the pace's burst a pod gets none.
func TestEachPodTheDrainEvictsIsNamedInAnEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		burst int
		want  int // Events of the 4 pods
	}{
		{name: "defaults", want: 4},
		{name: "paced", burst: 2, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
				if tc.burst > 0 {
					o.NodeMaintenance.PodEventBurst, o.NodeMaintenance.PodEventRate = tc.burst, 0.001
				}
			}})
			testutil.Kubelet(t, env.Clientset)
			node := "podevents-" + tc.name
			removeAtEnd(t, node) // before the manager stops: its finalizer restores the node
			ns := namespace(t, node)
			create(t, testutil.Node(node))
			pods := managedPods(t, ns, node, "web", 4)
			nm := nodeMaintenance(node, node)
			create(t, nm)
			awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 20*time.Second)

			listed := func() ([]string, error) {
				list := &eventsv1.EventList{}
				if err := env.Client.List(t.Context(), list); err != nil {
					return nil, err
				}
				var named []string
				for _, e := range list.Items {
					if e.Regarding.Kind != "NodeMaintenance" || e.Regarding.Name != nm.Name || e.Reason != pitstopv1alpha1.EventPodEvicted {
						continue
					}
					if e.Related == nil || e.Related.Kind != "Pod" || e.Related.Namespace != ns {
						return nil, fmt.Errorf("event %s relates to %+v, want a pod of %s", e.Name, e.Related, ns)
					}
					if want := fmt.Sprintf("pod %s/%s evicted from node %s", ns, e.Related.Name, node); e.Note != want {
						return nil, fmt.Errorf("event note %q, want %q", e.Note, want)
					}
					named = append(named, e.Related.Name)
				}
				return named, nil
			}
			testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
				named, err := listed()
				if err == nil && len(named) < tc.want {
					err = fmt.Errorf("%d PodEvicted Events (%v), want %d", len(named), named, tc.want)
				}
				return err
			})
			time.Sleep(time.Second) // none past the pace comes late
			named, err := listed()
			if err != nil {
				t.Fatal(err)
			}
			if len(named) != tc.want {
				t.Fatalf("%d PodEvicted Events (%v), want %d", len(named), named, tc.want)
			}
			for _, n := range named {
				if !slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.Name == n }) {
					t.Errorf("an Event names pod %s, which was not on the node", n)
				}
			}
		})
	}
}
