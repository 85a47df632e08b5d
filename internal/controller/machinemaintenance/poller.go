package machinemaintenance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// Condition types and reasons of a MachineMaintenance.
const (
	// ConditionSynced: the provider's events of the instance were read at
	// the last poll (False: the poll failed; the object is kept as it was).
	ConditionSynced = "Synced"
	// ConditionDeadlineAtRisk: nothing will act before the latest safe
	// start.
	ConditionDeadlineAtRisk = "DeadlineAtRisk"

	ReasonListed       = "Listed"
	ReasonPollFailed   = "PollFailed"
	ReasonNotListed    = "NotListed"
	ReasonInstanceGone = "InstanceGone"
)

// Poller reads the cloud's scheduled events and keeps the
// MachineMaintenances in step with them. It runs on the leader only.
type Poller struct {
	Client client.Client
	Cloud  cloud.Events
	// Namespace holds the MachineMaintenances of Nodes without a Machine
	// (pitstop's own).
	Namespace string
	// Interval between polls; the first is at start.
	Interval time.Duration
	// Machines says whether the Machine API is served: Machines' instances
	// are then followed, and their MachineMaintenances are owned by them.
	Machines bool
	Clock    clock.Clock
	Recorder events.EventRecorder
	Log      logr.Logger

	// polling lets one Poll run at a time: a poll ends the objects whose
	// events the cloud no longer lists, so one whose cloud answer predates
	// another poll's creations must not judge them.
	polling sync.Mutex
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica polls.
func (p *Poller) NeedLeaderElection() bool { return true }

// Start polls at once and then every Interval until ctx ends.
func (p *Poller) Start(ctx context.Context) error {
	for {
		if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error(err, "Polling scheduled events")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.Clock.After(p.Interval):
		}
	}
}

// owner is what an instance backs: a Machine (and its Node), or a Node.
type owner struct {
	target  cloud.Target
	machine *machinev1beta1.Machine
	node    string
}

// PollSummary says what one poll did.
type PollSummary struct {
	Targets, Events, Calls, Failed, Created, Ended int
}

// Poll reads the events of every instance the cluster runs and writes the
// MachineMaintenances: new events are created, changed ones updated,
// those no longer listed ended. Instances whose events could not be read
// are left as they were, marked not Synced.
func (p *Poller) Poll(ctx context.Context) (PollSummary, error) {
	p.polling.Lock()
	defer p.polling.Unlock()
	start := p.Clock.Now()
	owners, unread, err := p.owners(ctx)
	if err != nil {
		return PollSummary{}, err
	}
	targets := make([]cloud.Target, 0, len(owners))
	for id, o := range owners {
		if unread[id] == nil {
			targets = append(targets, o.target)
		}
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].InstanceID < targets[j].InstanceID })
	res := p.Cloud.Poll(ctx, targets)
	if res.Failed == nil {
		res.Failed = map[string]error{}
	}
	maps.Copy(res.Failed, unread)
	pollDuration.Observe(p.Clock.Since(start).Seconds())
	apiCalls.WithLabelValues(p.Cloud.Name()).Add(float64(res.Calls))
	sum := PollSummary{Targets: len(targets), Events: len(res.Events), Calls: res.Calls, Failed: len(res.Failed)}
	if len(res.Failed) > 0 {
		pollErrors.WithLabelValues(p.Cloud.Name()).Inc()
	} else {
		lastPoll.WithLabelValues(p.Cloud.Name()).SetToCurrentTime()
	}

	var list pitstopv1alpha1.MachineMaintenanceList
	if err := p.Client.List(ctx, &list); err != nil {
		return sum, fmt.Errorf("listing MachineMaintenances: %w", err)
	}
	existing := map[string]*pitstopv1alpha1.MachineMaintenance{}
	for i := range list.Items {
		mm := &list.Items[i]
		if mm.Spec.Provider == p.Cloud.Name() {
			existing[mm.Spec.InstanceID+"/"+mm.Spec.EventID] = mm
		}
	}
	now := p.Clock.Now()
	var errs []error
	seen := map[string]bool{}
	for _, e := range res.Events {
		key := e.InstanceID + "/" + e.ID
		seen[key] = true
		o := owners[e.InstanceID]
		mm := existing[key]
		if mm == nil {
			if e.State != cloud.EventScheduled {
				continue // over before pitstop saw it: nothing to record
			}
			created, err := p.create(ctx, o, e, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			sum.Created++
			mm = created
		}
		ended, err := p.listed(ctx, mm, o, e, now)
		if err != nil {
			errs = append(errs, err)
		}
		if ended {
			sum.Ended++
		}
	}
	for key, mm := range existing {
		if seen[key] || mm.Status.Phase.Finished() {
			continue
		}
		_, known := owners[mm.Spec.InstanceID]
		if failure := res.Failed[mm.Spec.InstanceID]; failure != nil {
			if err := p.unsynced(ctx, mm, failure, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		phase, reason, message := endPhase(mm, now, ""), ReasonNotListed, "the provider no longer lists the event"
		if !known {
			// Replaced or removed: the event can no longer hit it.
			phase, reason, message = pitstopv1alpha1.EventCompleted, ReasonInstanceGone, "the instance no longer backs a Machine or a Node of the cluster"
		}
		if err := p.end(ctx, mm, phase, reason, message, now); err != nil {
			errs = append(errs, err)
			continue
		}
		sum.Ended++
	}
	p.Log.V(1).Info("Polled scheduled events", "targets", sum.Targets, "events", sum.Events, "calls", sum.Calls,
		"failed", sum.Failed, "created", sum.Created, "ended", sum.Ended, "took", p.Clock.Since(start).String())
	if len(res.Failed) > 0 {
		errs = append(errs, fmt.Errorf("the events of %d instances could not be read: %w", len(res.Failed), firstError(res.Failed)))
	}
	return sum, errors.Join(errs...)
}

// owners maps the instance IDs of the cluster's Machines and Nodes to
// what they back. An instance is a Machine's by the Machine's own record
// (status.providerStatus, spec.providerID) and reaches a Node only through
// that Machine's status.nodeRef. A Node's spec.providerID, which its
// kubelet chose, adds an instance only for a node that runs on no
// Machine, and only when the provider's own record gives the instance the
// node's name; otherwise the node gets an UntrustedInstance Event and
// none of that instance's events. Instances whose record could not be
// read are returned in unread: their events are taken as unread.
func (p *Poller) owners(ctx context.Context) (owners map[string]owner, unread map[string]error, err error) {
	owners, unread = map[string]owner{}, map[string]error{}
	var machines []machinev1beta1.Machine
	if p.Machines {
		var list machinev1beta1.MachineList
		if err := p.Client.List(ctx, &list); err != nil {
			return nil, nil, fmt.Errorf("listing Machines: %w", err)
		}
		machines = list.Items
		for i := range machines {
			m := &machines[i]
			t, ok := p.Cloud.MachineTarget(m)
			if !ok {
				continue
			}
			o := owner{target: t, machine: m}
			if m.Status.NodeRef != nil {
				o.node = m.Status.NodeRef.Name
			}
			owners[t.InstanceID] = o
		}
	}
	var nodes corev1.NodeList
	if err := p.Client.List(ctx, &nodes); err != nil {
		return nil, nil, fmt.Errorf("listing Nodes: %w", err)
	}
	byNode := map[string]string{}
	for id, o := range owners {
		if o.node != "" {
			byNode[o.node] = id
		}
	}
	var alone []*corev1.Node
	var targets []cloud.Target
	for i := range nodes.Items {
		n := &nodes.Items[i]
		t, ok := p.Cloud.NodeTarget(n)
		owned, named := byNode[n.Name]
		if !ok && !named {
			continue
		}
		_, err := machineapi.MachineOfNode(n, machines)
		switch {
		case err == nil:
			// Its Machine's events reach it through status.nodeRef, which
			// MachineOfNode found consistent with what the node carries.
			continue
		case !errors.Is(err, machineapi.ErrNoMachine):
			if named {
				o := owners[owned]
				o.node = ""
				owners[owned] = o
			}
			p.untrusted(n, err.Error()+": no scheduled event is put on the node")
			continue
		}
		if o, taken := owners[t.InstanceID]; taken {
			// A Machine's instance without spec.providerID (known from its
			// status only), which names no node or another one.
			p.untrusted(n, fmt.Sprintf("node %s's spec.providerID %q names the instance of machine %s/%s, whose status.nodeRef does not name the node: no scheduled event of that instance is put on the node",
				n.Name, n.Spec.ProviderID, o.machine.Namespace, o.machine.Name))
			continue
		}
		alone = append(alone, n)
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return owners, unread, nil
	}
	names, failed := p.Cloud.NodeNames(ctx, targets)
	for i, n := range alone {
		t := targets[i]
		if err := failed[t.InstanceID]; err != nil {
			owners[t.InstanceID] = owner{target: t, node: n.Name}
			unread[t.InstanceID] = fmt.Errorf("checking that instance %s is node %s's: %w", t.InstanceID, n.Name, err)
			continue
		}
		if err := checkNodeName(n, t, names[t.InstanceID], p.Cloud.Name()); err != nil {
			p.untrusted(n, err.Error()+": its events are not put on the node")
			continue
		}
		owners[t.InstanceID] = owner{target: t, node: n.Name}
	}
	return owners, unread, nil
}

// untrusted says on a node that what it carries points at an instance
// that is not its own.
func (p *Poller) untrusted(n *corev1.Node, message string) {
	p.Log.V(1).Info("Node's instance not trusted", "node", klog.KObj(n), "reason", message)
	p.Recorder.Eventf(n, nil, corev1.EventTypeWarning, eventUntrustedInstance, "Poll", "%s", message)
}

// create makes the MachineMaintenance of a new event: beside its Machine
// and owned by it, or in pitstop's namespace for a Node without one.
func (p *Poller) create(ctx context.Context, o owner, e cloud.ScheduledEvent, now time.Time) (*pitstopv1alpha1.MachineMaintenance, error) {
	mm := &pitstopv1alpha1.MachineMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      maintenance.MachineMaintenanceName(e.InstanceID, e.ID),
			Labels:    map[string]string{},
		},
		Spec: specOf(p.Cloud.Name(), o, e),
	}
	if o.node != "" {
		mm.Labels[pitstopv1alpha1.LabelMachineMaintenanceNode] = o.node
	}
	if o.machine != nil {
		mm.Namespace = o.machine.Namespace
		if err := controllerutil.SetOwnerReference(o.machine, mm, p.Client.Scheme()); err != nil {
			return nil, err
		}
	}
	if err := p.Client.Create(ctx, mm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache had not shown it yet: the next poll updates it.
			return nil, nil //nolint:nilnil // nothing to update now
		}
		return nil, fmt.Errorf("creating MachineMaintenance %s/%s: %w", mm.Namespace, mm.Name, err)
	}
	p.Recorder.Eventf(mm, nil, corev1.EventTypeNormal, "Scheduled", "Notice", "%s scheduled for instance %s (node %q, machine %q) not before %s: %s",
		e.Code, e.InstanceID, o.node, machineName(o), timeOrUnknown(e.NotBefore), e.Description)
	return mm, nil
}

// listed updates an object whose event the provider lists: its spec, its
// last sighting, and its end when the provider says the event is over.
func (p *Poller) listed(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, o owner, e cloud.ScheduledEvent, now time.Time) (bool, error) {
	if mm == nil || mm.Status.Phase.Finished() {
		return false, nil
	}
	want := specOf(p.Cloud.Name(), o, e)
	if mm.Spec.NodeName != "" && want.NodeName == "" {
		want.NodeName = mm.Spec.NodeName
	}
	if mm.Spec.MachineName != "" && want.MachineName == "" {
		want.MachineName = mm.Spec.MachineName
	}
	if !equalSpec(mm.Spec, want) || (want.NodeName != "" && mm.Labels[pitstopv1alpha1.LabelMachineMaintenanceNode] != want.NodeName) {
		before := mm.DeepCopy()
		if mm.Spec.NotBefore != nil && want.NotBefore != nil && !mm.Spec.NotBefore.Equal(want.NotBefore) {
			p.Recorder.Eventf(mm, nil, corev1.EventTypeNormal, "Rescheduled", "Notice", "%s moved from %s to %s",
				e.Code, mm.Spec.NotBefore.UTC().Format(time.RFC3339), want.NotBefore.UTC().Format(time.RFC3339))
		}
		mm.Spec = want
		if want.NodeName != "" {
			if mm.Labels == nil {
				mm.Labels = map[string]string{}
			}
			mm.Labels[pitstopv1alpha1.LabelMachineMaintenanceNode] = want.NodeName
		}
		if err := p.Client.Patch(ctx, mm, client.MergeFrom(before)); err != nil {
			return false, fmt.Errorf("updating MachineMaintenance %s/%s: %w", mm.Namespace, mm.Name, err)
		}
	}
	switch e.State {
	case cloud.EventCanceled:
		return true, p.end(ctx, mm, pitstopv1alpha1.EventCanceled, ReasonListed, "the provider canceled the event", now)
	case cloud.EventCompleted:
		return true, p.end(ctx, mm, endPhase(mm, now, cloud.EventCompleted), ReasonListed, "the provider completed the event", now)
	}
	before := mm.DeepCopy()
	mm.Status.LastSeenTime = &metav1.Time{Time: now}
	if mm.Status.Phase == "" {
		mm.Status.Phase = pitstopv1alpha1.EventScheduled
	}
	meta.SetStatusCondition(&mm.Status.Conditions, metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionTrue,
		Reason: ReasonListed, Message: "the provider lists the event", ObservedGeneration: mm.Generation})
	return false, p.patchStatus(ctx, mm, before)
}

// unsynced marks an object whose events could not be read: the event
// stays as it was, and the error is reported once per outage.
func (p *Poller) unsynced(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, failure error, now time.Time) error {
	before := mm.DeepCopy()
	c := meta.FindStatusCondition(mm.Status.Conditions, ConditionSynced)
	if c == nil || c.Status != metav1.ConditionFalse {
		p.Recorder.Eventf(mm, nil, corev1.EventTypeWarning, ReasonPollFailed, "Poll", "reading the provider's scheduled events: %v; retried every poll", failure)
	}
	meta.SetStatusCondition(&mm.Status.Conditions, metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionFalse,
		Reason: ReasonPollFailed, Message: failure.Error(), ObservedGeneration: mm.Generation})
	return p.patchStatus(ctx, mm, before)
}

// end puts an object in a final phase.
func (p *Poller) end(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, phase pitstopv1alpha1.MachineMaintenancePhase, reason, message string, now time.Time) error {
	before := mm.DeepCopy()
	finish(mm, phase, now)
	meta.SetStatusCondition(&mm.Status.Conditions, metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: mm.Generation})
	if err := p.patchStatus(ctx, mm, before); err != nil {
		return err
	}
	p.Recorder.Eventf(mm, nil, corev1.EventTypeNormal, string(phase), "End", "%s: %s", mm.Spec.Code, message)
	return nil
}

// patchStatus writes mm's status with the resourceVersion it was read
// with: a merge patch replaces the list of conditions whole, so one made
// from a copy the reconciler has written since would take its conditions
// (DeadlineAtRisk) off, and the reconciler would raise them, and notify,
// again. A conflict is retried at the next poll.
func (p *Poller) patchStatus(ctx context.Context, mm, before *pitstopv1alpha1.MachineMaintenance) error {
	if err := p.Client.Status().Patch(ctx, mm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the status of MachineMaintenance %s/%s: %w", mm.Namespace, mm.Name, err)
	}
	return nil
}

// endPhase is the final phase of an event that is over: Completed when
// pitstop's action is done, Canceled when it ended before it was due
// (and the provider did not say it completed), Missed when the provider
// carried it out before pitstop acted.
func endPhase(mm *pitstopv1alpha1.MachineMaintenance, now time.Time, state cloud.EventState) pitstopv1alpha1.MachineMaintenancePhase {
	if a := mm.Status.Action; a != nil && a.Step == pitstopv1alpha1.StepDone {
		return pitstopv1alpha1.EventCompleted
	}
	if state != cloud.EventCompleted && mm.Spec.NotBefore != nil && now.Before(mm.Spec.NotBefore.Time) {
		return pitstopv1alpha1.EventCanceled
	}
	if a := mm.Status.Action; a != nil && a.Step != pitstopv1alpha1.StepRequested {
		return pitstopv1alpha1.EventCompleted
	}
	return pitstopv1alpha1.EventMissed
}

// finish records a final phase and when it was reached.
func finish(mm *pitstopv1alpha1.MachineMaintenance, phase pitstopv1alpha1.MachineMaintenancePhase, now time.Time) {
	mm.Status.Phase = phase
	if mm.Status.CompletionTime == nil {
		mm.Status.CompletionTime = &metav1.Time{Time: now}
	}
	meta.RemoveStatusCondition(&mm.Status.Conditions, ConditionDeadlineAtRisk)
}

func specOf(provider string, o owner, e cloud.ScheduledEvent) pitstopv1alpha1.MachineMaintenanceSpec {
	s := pitstopv1alpha1.MachineMaintenanceSpec{
		Provider: provider, InstanceID: e.InstanceID, EventID: e.ID, Code: e.Code, Description: e.Description,
		NodeName: o.node, MachineName: machineName(o),
	}
	if !e.NotBefore.IsZero() {
		s.NotBefore = &metav1.Time{Time: e.NotBefore.UTC()}
	}
	if !e.NotAfter.IsZero() {
		s.NotAfter = &metav1.Time{Time: e.NotAfter.UTC()}
	}
	// The provider marks an event over in its description; the object
	// keeps the description of the event as it was scheduled.
	s.Description = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s.Description, "[Completed]"), "[Canceled]"))
	return s
}

func equalSpec(a, b pitstopv1alpha1.MachineMaintenanceSpec) bool {
	return a.Provider == b.Provider && a.InstanceID == b.InstanceID && a.EventID == b.EventID && a.Code == b.Code &&
		a.Description == b.Description && a.NodeName == b.NodeName && a.MachineName == b.MachineName &&
		equalTime(a.NotBefore, b.NotBefore) && equalTime(a.NotAfter, b.NotAfter)
}

func equalTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Time.Unix() == b.Time.Unix()
}

func machineName(o owner) string {
	if o.machine == nil {
		return ""
	}
	return o.machine.Name
}

func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "(no start given)"
	}
	return t.UTC().Format(time.RFC3339)
}

func firstError(m map[string]error) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return m[keys[0]]
}
