package admission_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// replica is one manager's admission: its own client, slots and clock.
type replica struct {
	admission *admission.Admission
	slots     *budget.Slots
	clock     *clocktesting.FakeClock
}

func newReplica(t *testing.T, ns string, now time.Time) replica {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(now)
	// The API server stands in for the informer cache: Free and the
	// confirmation of a slot read it as they would the cache.
	slots := &budget.Slots{Client: c, Cache: c, Namespace: ns}
	return replica{admission: admission.New(slots, c, c, clk), slots: slots, clock: clk}
}

// budgetProfile is a profile whose move into maintenance takes a slot of
// its one budget check.
func budgetProfile(name string, budgetCheck pitstopv1alpha1.CheckInstance) *pitstopv1alpha1.MaintenanceProfile {
	budgetCheck.Name = "budget"
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				budgetCheck,
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// skewRig is a budget of one slot, two nodes that want it, and two
// replicas: a, whose clock is right, and b, whose clock is ahead by skew.
type skewRig struct {
	t             *testing.T
	profile       *pitstopv1alpha1.MaintenanceProfile
	compiled      admission.Profile
	key           budget.Key
	a, b          replica
	holder, other *corev1.Node
}

func newSkewRig(t *testing.T, name string, budgetCheck pitstopv1alpha1.CheckInstance, skew time.Duration) *skewRig {
	t.Helper()
	ns := testutil.Namespace(t, env.Client, name)
	p := budgetProfile(name, budgetCheck)
	c, err := fleet.Compile(p, check.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	r := &skewRig{t: t, profile: p, compiled: c.Admission()}
	b, ok := admission.BudgetOf(r.compiled, "budget", &corev1.Node{})
	if !ok {
		t.Fatal("the budget check is not a budget")
	}
	r.key = b.Key
	now := time.Now()
	r.a, r.b = newReplica(t, ns, now), newReplica(t, ns, now.Add(skew))
	r.holder = testutil.Node(name+"-holder", testutil.WithLabels(map[string]string{"pool": name}))
	r.other = testutil.Node(name+"-other", testutil.WithLabels(map[string]string{"pool": name}))
	testutil.Create(t, env.Client, r.holder, r.other)
	return r
}

// admit asks replica rep to let node in, as the engine does for a node in
// maintenance-required since an hour ago.
func (r *skewRig) admit(rep replica, node *corev1.Node) bool {
	r.t.Helper()
	now := rep.clock.Now()
	v, err := rep.admission.Admit(r.t.Context(), admission.Request{
		Profile: r.compiled, Transition: r.compiled.Transitions[pitstopv1alpha1.StateMaintenanceRequired][0],
		Node: node, Since: now.Add(-time.Hour), Now: now,
	})
	if err != nil {
		r.t.Fatalf("admitting %s: %v", node.Name, err)
	}
	return v.Admitted
}

func (r *skewRig) holders() []string {
	r.t.Helper()
	h, err := r.a.slots.Holders(r.t.Context(), r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *skewRig) step(d time.Duration) {
	r.a.clock.Step(d)
	r.b.clock.Step(d)
}

// TestUntrustedClockSkewDoesNotFreeASlot: replica a lets a node in on the
// one slot of a budget and confirms it as the node's transition is
// written (the node is not in maintenance yet, so only the grace spares
// its slot); replica b's clock is 60 s ahead. b's sweeps and b's own
// admission of another node, over 40 s, never free or take the slot: b
// judges the slot's age by what it saw change, not by the times a wrote.
// Once the holder stops confirming, b frees the slot, and only after it
// has itself watched the slot unchanged for the whole grace.
func TestUntrustedClockSkewDoesNotFreeASlot(t *testing.T) {
	r := newSkewRig(t, "skew-max", pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true}}, time.Minute)
	if !r.admit(r.a, r.holder) {
		t.Fatal("the first node was not let in")
	}
	profiles := []pitstopv1alpha1.MaintenanceProfile{*r.profile}
	for i := range 8 {
		if err := r.b.admission.Sweep(t.Context(), profiles); err != nil {
			t.Fatal(err)
		}
		if r.admit(r.b, r.other) {
			t.Fatalf("after %s, the replica whose clock is a minute ahead let %s in on the slot %s holds and confirms: holders %v, the budget of 1 is exceeded",
				time.Duration(i)*5*time.Second, r.other.Name, r.holder.Name, r.holders())
		}
		if h := r.holders(); len(h) != 1 || h[0] != r.holder.Name {
			t.Fatalf("after %s, the slot is held by %v, want [%s]", time.Duration(i)*5*time.Second, h, r.holder.Name)
		}
		r.step(5 * time.Second)
		if !r.admit(r.a, r.holder) { // its admission confirms the slot again
			t.Fatalf("the holder lost its slot after %s", time.Duration(i+1)*5*time.Second)
		}
	}

	// The holder stops confirming: b sees the slot unchanged from here.
	sweep := func() []string {
		t.Helper()
		if err := r.b.admission.Sweep(t.Context(), profiles); err != nil {
			t.Fatal(err)
		}
		return r.holders()
	}
	for range 3 {
		if h := sweep(); len(h) != 1 {
			t.Fatalf("b freed the slot before it saw it unchanged for the grace: holders %v", h)
		}
		r.step(4 * time.Second)
	}
	r.step(4 * time.Second)
	if h := sweep(); len(h) != 0 {
		t.Fatalf("b kept the slot of a holder not in maintenance, unchanged for 16 s: holders %v", h)
	}
}

// TestUntrustedClockSkewDoesNotExpireStaggerOrSkipAfterEarly: a stagger
// slot of 2 minutes, and a maxMaintenance slot with skipAfter 2 minutes of
// a node in maintenance, taken by replica a; replica b's clock is 5 minutes
// ahead. b lets no second node in until it has itself seen the slot
// unchanged for the 2 minutes, and then does.
func TestUntrustedClockSkewDoesNotExpireStaggerOrSkipAfterEarly(t *testing.T) {
	twoMinutes := pitstopv1alpha1.Duration{Duration: 2 * time.Minute}
	for name, budgetCheck := range map[string]pitstopv1alpha1.CheckInstance{
		"skew-stagger": {Stagger: &pitstopv1alpha1.StaggerCheck{Duration: twoMinutes, Parallel: 1}},
		"skew-skip":    {MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true, SkipAfter: ptr.To(twoMinutes)}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newSkewRig(t, name, budgetCheck, 5*time.Minute)
			if !r.admit(r.a, r.holder) {
				t.Fatal("the first node was not let in")
			}
			// The holder is in maintenance: only the expiry frees its slot.
			rec := engine.Record{Profiles: map[string]engine.ProfileRecord{name: {Current: pitstopv1alpha1.StateInMaintenance}}}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, pitstopv1alpha1.AnnotationMaintenanceData, rec.Encode())
			if err := env.Client.Patch(t.Context(), r.holder.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				t.Fatal(err)
			}
			for elapsed := time.Duration(0); elapsed < 2*time.Minute; elapsed += 30 * time.Second {
				if r.admit(r.b, r.other) {
					t.Fatalf("after %s, the replica whose clock is 5 minutes ahead let %s in on the slot %s took: holders %v", elapsed, r.other.Name, r.holder.Name, r.holders())
				}
				r.step(30 * time.Second)
			}
			if !r.admit(r.b, r.other) {
				t.Fatalf("b did not let %s in once it saw the slot unchanged for 2 minutes: holders %v", r.other.Name, r.holders())
			}
		})
	}
}
