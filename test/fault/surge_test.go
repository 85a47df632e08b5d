//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// The MachineSet the surges strike, and how its machines are asked to be
// replaced.
const (
	surgeNamespace = "fault-surge"
	surgeSet       = "surge"
	surgeSize      = 3
	// surgePool labels the set's nodes (nodelink copies it from the
	// machines' spec): the surge profile selects them, and only them.
	surgePool = "fault.example.com/surge-pool"
	// surgeAsk on a node asks the surge profile to replace its machine:
	// askSurge with the default timeout (20m), askWithin with the
	// strike's short one.
	surgeAsk     = "fault.example.com/replace"
	askSurge     = "surge"
	askWithin    = "within"
	surgeProfile = "surge"
)

// surgeArgs run pitstop's Machine API on the kwok provider, and its
// MachineMaintenance controller, which carries out a profile's
// replaceMachine. That controller comes with --cloud-events; its poller
// finds no EC2 instance behind kwok machines and nodes and so calls no
// endpoint (the one given is a closed port of this machine, so that
// nothing could leave it).
var surgeArgs = []string{"--machine-api", "--machine-providers=kwok", "--cloud-events=aws", "--aws-region=us-east-1", "--aws-endpoint=http://127.0.0.1:9"}

// TestFaultSurgeWorldChanges changes the world under surges. A MachineSet
// of three kwok machines of its own (namespace fault-surge; no sample
// workload lands on their nodes but the node-agent DaemonSet, which
// tolerates everything) is replaced machine by machine, with surge, by a
// profile asked through an annotation on the node, as a user would ask;
// two `pitstop run` processes run the Machine API (the kwok provider) with
// leader election. The surge's new machine is held short of Ready by
// stopping kwok, which plays every kubelet: a new instance whose kubelet
// has not come up. Then, in turn:
//  1. the old machine is deleted (as a user or a health check would) while
//     the surge waits for the new one: the set takes the surge's replica
//     back and the new machine stays; pitstop removes no machine;
//  2. the user cancels the replacement (the annotation off, then the
//     MachineMaintenance deleted) while the surge waits: the surge is
//     undone, the set removes the new machine and keeps the old one;
//  3. the new machine never becomes Ready (kwok stays stopped past the
//     replaceMachine timeout: 10 s; 20 s in the short form, 1 min in the
//     long one): the surge is undone as in 2 and the action fails;
//  4. in the short and long forms, the leader is SIGKILLed while the surge
//     waits for the new machine, and again once the old one is marked: the
//     surge completes, removing the old machine and no other.
//
// The long form runs these three times. After each, the set asks for its
// size, carries no surge record and has exactly that many machines, each
// Running with its node Ready, and no node of a removed one is left. Every
// Machine removal the test did not make itself is recorded, and pitstop
// may have removed only the one machine the path calls for. The watcher
// holds every worker out of maintenance throughout.
func TestFaultSurgeWorldChanges(t *testing.T) {
	within := strike(10*time.Second, 20*time.Second, time.Minute)
	r := newRigWith(t, rigOptions{
		nodes:    workerNames(),
		profiles: []*pitstopv1alpha1.MaintenanceProfile{surgeProfileFor(within)},
		bounds:   []bound{{name: "the workers, which no surge may touch", selects: isWorker, max: 0}},
		args:     surgeArgs,
	})
	s := startSurges(r)
	for round := range strike(1, 1, 3) {
		if round > 0 {
			t.Logf("round %d", round+1)
		}
		s.oldMachineDeleted()
		s.cancelled()
		s.neverReady(within)
		if *form == "short" || *form == "long" {
			s.leaderKilled()
		}
	}
	s.finish()
}

// surges is the MachineSet the test strikes, and what it saw.
type surges struct {
	*rig
	removals *removalLog
	// held says kwok is stopped; picked are the machines a strike has
	// replaced or tried to; nodes are every node the set's machines had.
	held    bool
	picked  map[string]bool
	nodes   map[string]bool
	strikes []string
	cleaned bool
}

// startSurges creates the surge profile and the MachineSet, and waits
// until its machines run with their nodes Ready.
func startSurges(r *rig) *surges {
	t := r.t
	ctx := context.Background()
	s := &surges{rig: r, picked: map[string]bool{}, nodes: map[string]bool{}}
	// Registered after the rig's clean-up, so run before it: pitstop must
	// still run to drain and remove the set's machines.
	t.Cleanup(s.cleanUp)
	for _, p := range r.opts.profiles {
		_ = admin.Delete(ctx, p.DeepCopy())
		testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error { return admin.Create(ctx, p.DeepCopy()) })
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: surgeNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, surgeMachineSet()); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	machines := s.awaitAtSize(2 * time.Minute)
	t.Logf("MachineSet %s/%s: %d machines running with their nodes Ready in %s: %s", surgeNamespace, surgeSet, surgeSize,
		time.Since(began).Round(100*time.Millisecond), strings.Join(machines, ", "))
	s.removals = watchRemovals()
	return s
}

// surgeMachineSet is the set of kwok machines the test surges.
func surgeMachineSet() *machinev1beta1.MachineSet {
	selector := map[string]string{"fault.example.com/set": surgeSet}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: surgeNamespace, Name: surgeSet},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To[int32](surgeSize),
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: selector},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{surgePool: surgeSet}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(
						`{"apiVersion": "pitstop.dev/v1alpha1", "kind": "KwokMachineProviderConfig", "zone": "zone-a", "instanceType": "kwok.small"}`)}},
				},
			},
		},
	}
}

// surgeProfileFor replaces the machine of a node of the set that asks
// for it (surgeAsk), with surge: askSurge with the default timeout,
// askWithin with within. A node no longer asking goes back to operational,
// so that a user can cancel a replacement: the annotation off, then the
// MachineMaintenance deleted.
func surgeProfileFor(within time.Duration) *pitstopv1alpha1.MaintenanceProfile {
	surge, soon := askSurge, askWithin
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: surgeProfile},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{surgePool: surgeSet}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "asked", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: surgeAsk}},
				{Name: "surge", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: surgeAsk, Value: &surge}},
				{Name: "surge_within", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: surgeAsk, Value: &soon}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}},
				{Name: "replace_within", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{Timeout: &pitstopv1alpha1.Duration{Duration: within}}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "asked", Next: pitstopv1alpha1.StateMaintenanceRequired},
				}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "surge", Triggers: []string{"replace"}, Next: pitstopv1alpha1.StateInMaintenance},
					{Check: "surge_within", Triggers: []string{"replace_within"}, Next: pitstopv1alpha1.StateInMaintenance},
					{Check: "!asked", Next: pitstopv1alpha1.StateOperational},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "!asked", Next: pitstopv1alpha1.StateOperational},
				}},
			},
		},
	}
}

// oldMachineDeleted: the old machine is deleted while the surge waits for
// its new one. The set replaces it with the new one, so the surge's
// replica is taken back and the action is done; pitstop removes nothing.
func (s *surges) oldMachineDeleted() {
	old, mm, added, from, began := s.surgeHeld(askSurge)
	s.t.Logf("deleting old machine %s while surge %s waits for new machine %s, its node not Ready", old, mm, added)
	s.removeMachine(old)
	done := s.awaitStep(mm, pitstopv1alpha1.StepDone, 2*time.Minute)
	s.release()
	s.awaitAtSize(2 * time.Minute)
	s.wantRemoved("old machine "+old+" deleted mid-surge", from, nil, []string{added})
	s.settled("old machine deleted mid-surge", began, from, done)
	s.forget(mm, "")
}

// surgeHeld asks for the replacement of a machine (how: askSurge or
// askWithin) with every kubelet held, and waits until the surge holds its
// new machine short of Ready. It returns the old machine, the
// MachineMaintenance, the new machine, the removals' mark and the time.
func (s *surges) surgeHeld(how string) (old, mm, added string, from int, began time.Time) {
	old = s.pick()
	s.hold()
	mm = s.ask(old, how)
	added = s.awaitHeld(mm)
	return old, mm, added, s.removals.mark(), time.Now()
}

// cancelled: the user cancels the replacement while the surge waits for
// its new machine: the node stops asking, then the MachineMaintenance is
// deleted. It stays until the surge is undone: the set removes the new
// machine, keeps the old one and ends at its size.
func (s *surges) cancelled() {
	old, mm, added, from, began := s.surgeHeld(askSurge)
	s.t.Logf("cancelling surge %s (the request off node %s, then the MachineMaintenance deleted) while it waits for new machine %s", mm, old, added)
	s.unask(old)
	if err := admin.Delete(context.Background(), &pitstopv1alpha1.MachineMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: surgeNamespace, Name: mm}}); err != nil {
		s.t.Fatal(err)
	}
	testutil.Eventually(s.t, 2*time.Minute, 100*time.Millisecond, func() error {
		got := &pitstopv1alpha1.MachineMaintenance{}
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: surgeNamespace, Name: mm}, got)
		if err == nil {
			return fmt.Errorf("MachineMaintenance %s/%s, deleted mid-surge, is still there: %s", surgeNamespace, mm, actionOf(got))
		}
		return client.IgnoreNotFound(err)
	})
	// Its node never Ready: the undo removed it, not a kubelet that came
	// up late.
	s.awaitGone(added, from, 2*time.Minute)
	s.release()
	s.awaitAtSize(2 * time.Minute)
	s.wantRemoved("MachineMaintenance "+mm+" deleted mid-surge", from, []string{added}, []string{old})
	s.settled("MachineMaintenance deleted mid-surge", began, from, "(gone)")
}

// neverReady: the new machine's node never becomes Ready. Past the
// replaceMachine timeout the surge is undone: the set removes the new
// machine, keeps the old one and ends at its size; the action fails,
// saying why.
func (s *surges) neverReady(within time.Duration) {
	old, mm, added, from, began := s.surgeHeld(askWithin)
	s.t.Logf("holding new machine %s of surge %s short of Ready past its %s timeout", added, mm, within)
	failed := s.awaitStep(mm, pitstopv1alpha1.StepFailed, within+2*time.Minute)
	if want := "new machine " + added + " did not run with its node Ready within " + within.String(); !strings.Contains(failed, want) {
		s.t.Errorf("surge %s failed saying %q; want it to say %q", mm, failed, want)
	}
	// The user, told the replacement failed, withdraws the request.
	s.unask(old)
	s.awaitGone(added, from, 2*time.Minute)
	s.release()
	s.awaitAtSize(2 * time.Minute)
	s.wantRemoved("new machine "+added+" never Ready", from, []string{added}, []string{old})
	s.settled("replacement never Ready", began, from, failed)
	s.forget(mm, "")
}

// leaderKilled: the leader is SIGKILLed while the surge waits for its new
// machine, and again once the old one is marked and before the set
// shrinks: the standby completes the surge, which removes the old machine
// and no other.
func (s *surges) leaderKilled() {
	ctx := context.Background()
	old, mm, added, from, began := s.surgeHeld(askSurge)
	leader := s.awaitLeader()
	s.t.Logf("SIGKILL %s while surge %s waits for new machine %s", leader.name, mm, added)
	leader.kill()
	s.release()
	testutil.Eventually(s.t, 2*time.Minute, 20*time.Millisecond, func() error {
		got := &pitstopv1alpha1.MachineMaintenance{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: mm}, got); err != nil {
			return err
		}
		a := got.Status.Action
		if a == nil || a.Step != pitstopv1alpha1.StepDeletingMachine || a.MarkedTime == nil {
			return fmt.Errorf("surge %s has not marked old machine %s yet: %s", mm, old, actionOf(got))
		}
		if n := s.replicas(); n != surgeSize+1 {
			return fmt.Errorf("surge %s marked old machine %s, but MachineSet %s/%s has already shrunk to %d (the kill was to land before)", mm, old, surgeNamespace, surgeSet, n)
		}
		return nil
	})
	leader = s.awaitLeader()
	s.t.Logf("SIGKILL %s once surge %s has marked old machine %s, before the set shrinks", leader.name, mm, old)
	leader.kill()
	done := s.awaitStep(mm, pitstopv1alpha1.StepDone, 3*time.Minute)
	s.awaitAtSize(2 * time.Minute)
	s.wantRemoved("leader killed mid-surge", from, []string{old}, []string{added})
	s.settled("leader SIGKILLed mid-surge, twice", began, from, done)
	s.forget(mm, "")
}

// pick returns the oldest machine of the set that no strike has picked
// yet, else the oldest.
func (s *surges) pick() string {
	machines := s.awaitAtSize(2 * time.Minute)
	old := machines[0]
	for _, m := range machines {
		if !s.picked[m] {
			old = m
			break
		}
	}
	s.picked[old] = true
	return old
}

// hold stops kwok, so that no new node becomes Ready.
func (s *surges) hold() {
	if err := cluster.StopComponent("kwok"); err != nil {
		s.t.Fatal(err)
	}
	s.held = true
}

// release starts kwok again.
func (s *surges) release() {
	if err := cluster.StartComponent(context.Background(), "kwok"); err != nil {
		s.t.Fatal(err)
	}
	s.held = false
}

// ask asks for the replacement of machine old as a user would: the
// annotation the profile reads, set to how on its node. It returns the
// MachineMaintenance the profile's trigger made for it.
func (s *surges) ask(old, how string) string {
	s.t.Helper()
	ctx := context.Background()
	patch := []byte(`{"metadata":{"annotations":{"` + surgeAsk + `":"` + how + `"}}}`)
	if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: old}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.t.Fatal(err)
	}
	var name string
	testutil.Eventually(s.t, time.Minute, 100*time.Millisecond, func() error {
		list := &pitstopv1alpha1.MachineMaintenanceList{}
		if err := admin.List(ctx, list, client.InNamespace(surgeNamespace), client.MatchingLabels{pitstopv1alpha1.LabelMachineMaintenanceNode: old}); err != nil {
			return err
		}
		for _, mm := range list.Items {
			if a := mm.Status.Action; a != nil && a.Type == pitstopv1alpha1.ActionReplace && mm.DeletionTimestamp.IsZero() && mm.Spec.MachineName == old {
				name = mm.Name
				return nil
			}
		}
		return fmt.Errorf("profile %s has not asked for the replacement of machine %s (node annotated %s=%s): %s", surgeProfile, old, surgeAsk, how, s.describe())
	})
	return name
}

// unask takes the request off the node, and waits until the profile has
// taken the node back to operational, so that it asks no more.
func (s *surges) unask(node string) {
	s.t.Helper()
	ctx := context.Background()
	patch := []byte(`{"metadata":{"annotations":{"` + surgeAsk + `":null}}}`)
	if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.t.Fatal(err)
	}
	testutil.Eventually(s.t, time.Minute, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if state := n.Labels[pitstopv1alpha1.LabelState]; state != string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("node %s, asking no more, is still %q for profile %s", node, state, surgeProfile)
		}
		return nil
	})
}

// awaitHeld waits until surge mm has grown the set and claimed its new
// machine, which runs with its node, not Ready: the surge waits for it.
// It returns the new machine.
func (s *surges) awaitHeld(mm string) string {
	s.t.Helper()
	ctx := context.Background()
	var added string
	testutil.Eventually(s.t, 2*time.Minute, 50*time.Millisecond, func() error {
		got := &pitstopv1alpha1.MachineMaintenance{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: mm}, got); err != nil {
			return err
		}
		a := got.Status.Action
		if a == nil || a.Step != pitstopv1alpha1.StepWaitingForReplacement || a.Replacement == "" {
			if a != nil && (a.Step == pitstopv1alpha1.StepDone || a.Step == pitstopv1alpha1.StepFailed || a.Step == pitstopv1alpha1.StepUndoingSurge) {
				s.t.Fatalf("surge %s ended before its new machine was held short of Ready: %s", mm, actionOf(got))
			}
			return fmt.Errorf("surge %s has not claimed a new machine yet: %s", mm, actionOf(got))
		}
		added = a.Replacement
		m := &machinev1beta1.Machine{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: added}, m); err != nil {
			return err
		}
		if m.Status.NodeRef == nil {
			return fmt.Errorf("new machine %s of surge %s has no node yet (phase %q)", added, mm, ptr.Deref(m.Status.Phase, ""))
		}
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
			return err
		}
		s.nodes[node.Name] = true
		if nodeview.Ready(node) {
			s.t.Fatalf("node %s of new machine %s is Ready with kwok stopped: the strike cannot hold the surge", node.Name, added)
		}
		if n := s.replicas(); n != surgeSize+1 {
			return fmt.Errorf("surge %s waits for new machine %s, but MachineSet %s/%s asks for %d replicas, want %d", mm, added, surgeNamespace, surgeSet, n, surgeSize+1)
		}
		return nil
	})
	return added
}

// awaitStep waits until surge mm's action ends at step, and returns its
// message; an action that ends otherwise fails the test.
func (s *surges) awaitStep(mm string, step pitstopv1alpha1.ActionStep, timeout time.Duration) string {
	s.t.Helper()
	var msg string
	testutil.Eventually(s.t, timeout, 100*time.Millisecond, func() error {
		got := &pitstopv1alpha1.MachineMaintenance{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: surgeNamespace, Name: mm}, got); err != nil {
			return err
		}
		a := got.Status.Action
		if a != nil && a.Step == step {
			msg = a.Message
			return nil
		}
		if a != nil && (a.Step == pitstopv1alpha1.StepDone || a.Step == pitstopv1alpha1.StepFailed) {
			s.t.Fatalf("surge %s ended %s, want %s: %s", mm, a.Step, step, a.Message)
		}
		return fmt.Errorf("surge %s not %s yet: %s", mm, step, actionOf(got))
	})
	return msg
}

// awaitGone waits until machine name and its node are gone (the node a
// kubelet could still bring up, were it only going); pitstop removing
// another machine since mark instead fails the test at once.
func (s *surges) awaitGone(name string, mark int, timeout time.Duration) {
	s.t.Helper()
	ctx := context.Background()
	testutil.Eventually(s.t, timeout, 100*time.Millisecond, func() error {
		for _, r := range s.removals.since(mark) {
			if !r.byTest && r.machine != name {
				s.t.Fatalf("pitstop removed machine %s of MachineSet %s/%s while undoing a surge, which must remove its new machine %s and no other", r.machine, surgeNamespace, surgeSet, name)
			}
		}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: name}, &machinev1beta1.Machine{}); err == nil {
			return fmt.Errorf("machine %s of MachineSet %s/%s is still there", name, surgeNamespace, surgeSet)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err == nil {
			return fmt.Errorf("node %s of removed machine %s is still there", name, name)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// removeMachine deletes a machine of the set as a user or a health check
// would, and records that the test removed it.
func (s *surges) removeMachine(name string) {
	s.t.Helper()
	s.removals.byTestOf(name)
	if err := admin.Delete(context.Background(), &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: surgeNamespace, Name: name}}); err != nil {
		s.t.Fatal(err)
	}
}

// forget deletes a surge's MachineMaintenance once its action is over,
// after taking the request off node (if it is still there), so that the
// profile asks no more: what a user does once a replacement is over.
func (s *surges) forget(mm, node string) {
	s.t.Helper()
	ctx := context.Background()
	if node != "" {
		s.unask(node)
	}
	obj := &pitstopv1alpha1.MachineMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: surgeNamespace, Name: mm}}
	if err := admin.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		s.t.Fatal(err)
	}
	testutil.Eventually(s.t, 30*time.Second, 100*time.Millisecond, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err == nil {
			return fmt.Errorf("MachineMaintenance %s/%s, its action over, is still there after its deletion: %s", surgeNamespace, mm, actionOf(obj))
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// replicas is the set's spec.replicas.
func (s *surges) replicas() int32 {
	ms := &machinev1beta1.MachineSet{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: surgeNamespace, Name: surgeSet}, ms); err != nil {
		return -1
	}
	return ptr.Deref(ms.Spec.Replicas, 1)
}

// awaitAtSize waits until the set is at its size: it asks for surgeSize
// replicas, carries no surge record, and has exactly surgeSize machines,
// none being deleted, each Running with its node Ready and taking
// workloads; no node of another machine of the set is left. It returns
// the machines, oldest first.
func (s *surges) awaitAtSize(timeout time.Duration) []string {
	s.t.Helper()
	ctx := context.Background()
	var names []string
	testutil.Eventually(s.t, timeout, 200*time.Millisecond, func() error {
		if err := s.watch.violation(); err != nil {
			s.t.Fatal(err)
		}
		ms := &machinev1beta1.MachineSet{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: surgeSet}, ms); err != nil {
			return err
		}
		for k := range ms.Annotations {
			if strings.HasPrefix(k, pitstopv1alpha1.AnnotationSurgePrefix) {
				return fmt.Errorf("MachineSet %s/%s still carries surge record %s=%s (replicas %d)", surgeNamespace, surgeSet, k, ms.Annotations[k], ptr.Deref(ms.Spec.Replicas, 1))
			}
		}
		if n := ptr.Deref(ms.Spec.Replicas, 1); n != surgeSize {
			return fmt.Errorf("MachineSet %s/%s asks for %d replicas, want %d", surgeNamespace, surgeSet, n, surgeSize)
		}
		list := &machinev1beta1.MachineList{}
		if err := admin.List(ctx, list, client.InNamespace(surgeNamespace)); err != nil {
			return err
		}
		slices.SortFunc(list.Items, func(a, b machinev1beta1.Machine) int {
			if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
				return d
			}
			return strings.Compare(a.Name, b.Name)
		})
		names = names[:0]
		live := map[string]bool{}
		for _, m := range list.Items {
			if !m.DeletionTimestamp.IsZero() {
				return fmt.Errorf("machine %s of MachineSet %s/%s is still being deleted", m.Name, surgeNamespace, surgeSet)
			}
			if m.Status.NodeRef == nil || ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning {
				return fmt.Errorf("machine %s of MachineSet %s/%s is %q, its node %v", m.Name, surgeNamespace, surgeSet, ptr.Deref(m.Status.Phase, ""), m.Status.NodeRef)
			}
			node := &corev1.Node{}
			if err := admin.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
				return fmt.Errorf("node of machine %s: %w", m.Name, err)
			}
			s.nodes[node.Name] = true
			if !nodeview.Serving(node) || node.Labels[surgePool] != surgeSet {
				return fmt.Errorf("node %s of machine %s is not Ready, taking workloads and labelled %s yet", node.Name, m.Name, surgePool)
			}
			names = append(names, m.Name)
			live[m.Name] = true
		}
		if len(names) != surgeSize {
			return fmt.Errorf("MachineSet %s/%s has %d machines (%s), want %d", surgeNamespace, surgeSet, len(names), strings.Join(names, ", "), surgeSize)
		}
		nodes := &corev1.NodeList{}
		if err := admin.List(ctx, nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			owner, ok := strings.CutPrefix(n.Annotations[pitstopv1alpha1.AnnotationKwokMachine], surgeNamespace+"/")
			if ok && !live[owner] {
				return fmt.Errorf("node %s of removed machine %s is still there", n.Name, owner)
			}
		}
		return nil
	})
	return slices.Clone(names)
}

// wantRemoved checks what pitstop removed since mark for one replacement
// (strike says which): want and nothing else, at most one machine, with
// kept still there and unmarked.
func (s *surges) wantRemoved(strike string, mark int, want, kept []string) {
	s.t.Helper()
	var byPitstop []string
	for _, r := range s.removals.since(mark) {
		if !r.byTest {
			byPitstop = append(byPitstop, r.machine)
		}
	}
	if len(byPitstop) > 1 {
		s.t.Errorf("%s: pitstop removed %d machines of MachineSet %s/%s for one replacement (%s), want at most one (%s)",
			strike, len(byPitstop), surgeNamespace, surgeSet, strings.Join(byPitstop, ", "), orNone(want))
	} else if !slices.Equal(byPitstop, want) {
		s.t.Errorf("%s: pitstop removed %s of MachineSet %s/%s, want %s", strike, orNone(byPitstop), surgeNamespace, surgeSet, orNone(want))
	}
	for _, name := range kept {
		m := &machinev1beta1.Machine{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: surgeNamespace, Name: name}, m); err != nil || !m.DeletionTimestamp.IsZero() {
			s.t.Errorf("%s: machine %s of MachineSet %s/%s, which must stay, was removed (%v)", strike, name, surgeNamespace, surgeSet, err)
			continue
		}
		if v, marked := m.Annotations[machineapi.AnnotationDeleteMachine]; marked {
			s.t.Errorf("%s: machine %s of MachineSet %s/%s, which stays, keeps the deletion mark %q", strike, name, surgeNamespace, surgeSet, v)
		}
	}
}

// settled logs how long a strike took to settle and what was removed.
func (s *surges) settled(strike string, began time.Time, mark int, outcome string) {
	var byPitstop, byTest []string
	for _, r := range s.removals.since(mark) {
		if r.byTest {
			byTest = append(byTest, r.machine)
		} else {
			byPitstop = append(byPitstop, r.machine)
		}
	}
	took := time.Since(began).Round(100 * time.Millisecond)
	s.strikes = append(s.strikes, fmt.Sprintf("%s: %s", strike, took))
	s.t.Logf("%s: the set back at its size %s after the strike; pitstop removed %s, the test %s; the action: %s",
		strike, took, orNone(byPitstop), orNone(byTest), outcome)
}

// finish checks the watcher, cleans up and checks that nothing is left.
func (s *surges) finish() {
	s.t.Helper()
	if err := s.watch.violation(); err != nil {
		s.t.Fatal(err)
	}
	all := s.removals.since(0)
	byPitstop := 0
	for _, r := range all {
		if !r.byTest {
			byPitstop++
		}
	}
	s.cleanUp()
	testutil.Eventually(s.t, 45*time.Second, 500*time.Millisecond, func() error { return leftBehind(context.Background()) })
	s.t.Logf("%d strikes (%s); %d machine removals seen, %d by pitstop; pitstop started %d times; %s",
		len(s.strikes), strings.Join(s.strikes, "; "), len(all), byPitstop, s.starts(), s.watch.checks())
}

// cleanUp starts kwok if a strike left it stopped, takes every request off
// the set's nodes, deletes the MachineMaintenances (a surge still under
// way is undone first) and the set, whose machines pitstop drains and
// removes with their nodes, then the namespace; and it removes the
// node-agent pods left bound to the removed nodes, as the pod garbage
// collector would 40 s later.
func (s *surges) cleanUp() {
	if s.cleaned {
		return
	}
	s.cleaned = true
	ctx := context.Background()
	if s.held {
		if err := cluster.StartComponent(ctx, "kwok"); err != nil {
			s.t.Errorf("starting kwok again: %v", err)
		}
		s.held = false
	}
	if s.removals != nil {
		s.removals.stop()
	}
	for node := range s.nodes {
		patch := []byte(`{"metadata":{"annotations":{"` + surgeAsk + `":null}}}`)
		_ = admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
	}
	_ = admin.DeleteAllOf(ctx, &pitstopv1alpha1.MachineMaintenance{}, client.InNamespace(surgeNamespace))
	_ = admin.Delete(ctx, &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: surgeNamespace, Name: surgeSet}},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	err := waitFor(2*time.Minute, func() error { return s.leftOf(ctx) })
	if err != nil {
		s.t.Errorf("the surges' MachineSet not cleaned up in 2 minutes (%v): removing what is left by force", err)
		s.force(ctx)
	}
	_ = admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: surgeNamespace}})
	if err := waitFor(time.Minute, func() error {
		if err := admin.Get(ctx, client.ObjectKey{Name: surgeNamespace}, &corev1.Namespace{}); err == nil {
			return fmt.Errorf("namespace %s is still there", surgeNamespace)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}); err != nil {
		s.t.Errorf("cleaning up: %v", err)
	}
	pods := &corev1.PodList{}
	if err := admin.List(ctx, pods); err != nil {
		s.t.Errorf("listing the pods left on the surges' nodes: %v", err)
		return
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; s.nodes[p.Spec.NodeName] {
			if err := admin.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				s.t.Errorf("removing pod %s/%s of removed node %s: %v", p.Namespace, p.Name, p.Spec.NodeName, err)
			}
		}
	}
}

// leftOf says what of the surges' set is left: the set, machines,
// MachineMaintenances, nodes.
func (s *surges) leftOf(ctx context.Context) error {
	if err := admin.Get(ctx, client.ObjectKey{Namespace: surgeNamespace, Name: surgeSet}, &machinev1beta1.MachineSet{}); err == nil {
		return fmt.Errorf("MachineSet %s/%s is still there", surgeNamespace, surgeSet)
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	machines := &machinev1beta1.MachineList{}
	if err := admin.List(ctx, machines, client.InNamespace(surgeNamespace)); err != nil {
		return err
	}
	if len(machines.Items) > 0 {
		return fmt.Errorf("machine %s is still there", machines.Items[0].Name)
	}
	mms := &pitstopv1alpha1.MachineMaintenanceList{}
	if err := admin.List(ctx, mms, client.InNamespace(surgeNamespace)); err != nil {
		return err
	}
	if len(mms.Items) > 0 {
		return fmt.Errorf("MachineMaintenance %s is still there: %s", mms.Items[0].Name, actionOf(&mms.Items[0]))
	}
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Annotations[pitstopv1alpha1.AnnotationKwokMachine], surgeNamespace+"/") {
			s.nodes[n.Name] = true
			return fmt.Errorf("node %s of machine %s is still there", n.Name, n.Annotations[pitstopv1alpha1.AnnotationKwokMachine])
		}
	}
	return nil
}

// force removes what is left of the surges' set when pitstop did not:
// finalizers off, nodes deleted.
func (s *surges) force(ctx context.Context) {
	mms := &pitstopv1alpha1.MachineMaintenanceList{}
	if admin.List(ctx, mms, client.InNamespace(surgeNamespace)) == nil {
		for i := range mms.Items {
			mms.Items[i].Finalizers = nil
			_ = admin.Update(ctx, &mms.Items[i])
		}
	}
	machines := &machinev1beta1.MachineList{}
	if admin.List(ctx, machines, client.InNamespace(surgeNamespace)) == nil {
		for i := range machines.Items {
			machines.Items[i].Finalizers = nil
			_ = admin.Update(ctx, &machines.Items[i])
			_ = admin.Delete(ctx, &machines.Items[i])
		}
	}
	nodes := &corev1.NodeList{}
	if admin.List(ctx, nodes) == nil {
		for i := range nodes.Items {
			if strings.HasPrefix(nodes.Items[i].Annotations[pitstopv1alpha1.AnnotationKwokMachine], surgeNamespace+"/") {
				s.nodes[nodes.Items[i].Name] = true
				_ = admin.Delete(ctx, &nodes.Items[i])
			}
		}
	}
}

// waitFor polls check until it passes or timeout has passed, and returns
// its last error.
func waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// actionOf says where a MachineMaintenance's action is, for messages.
func actionOf(mm *pitstopv1alpha1.MachineMaintenance) string {
	a := mm.Status.Action
	if a == nil {
		return "no action"
	}
	return fmt.Sprintf("step %s, new machine %q: %s", a.Step, a.Replacement, a.Message)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// removalLog records every machine of the surges' namespace seen going
// (deleted, or being deleted), in order, and whether the test removed it
// itself: a poll every 100 ms (a machine's finalizer holds it at least
// through its drain, far longer).
type removalLog struct {
	mu      sync.Mutex
	byTest  map[string]bool
	removed []removal
	stop    func()
}

// removal is one machine seen going.
type removal struct {
	machine string
	byTest  bool
}

func watchRemovals() *removalLog {
	l := &removalLog{byTest: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.stop = func() { cancel(); <-done }
	seen := map[string]bool{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list := &machinev1beta1.MachineList{}
			if err := admin.List(ctx, list, client.InNamespace(surgeNamespace)); err == nil {
				live := map[string]bool{}
				for i := range list.Items {
					if m := &list.Items[i]; m.DeletionTimestamp.IsZero() {
						live[m.Name], seen[m.Name] = true, true
					}
				}
				var gone []string
				for name := range seen {
					if !live[name] {
						gone = append(gone, name)
						delete(seen, name)
					}
				}
				slices.Sort(gone)
				l.mu.Lock()
				for _, name := range gone {
					l.removed = append(l.removed, removal{machine: name, byTest: l.byTest[name]})
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return l
}

// byTestOf records that the test removes machine name.
func (l *removalLog) byTestOf(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byTest[name] = true
}

// mark is where the removals seen so far end.
func (l *removalLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.removed)
}

// since returns the removals seen after mark.
func (l *removalLog) since(mark int) []removal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.removed[mark:])
}
