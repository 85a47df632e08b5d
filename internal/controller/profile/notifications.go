package profile

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/notify"
)

// notifier sends rendered notifications in the background.
type notifier interface {
	Enqueue(node *corev1.Node, m notify.Message)
	Failed(node *corev1.Node, m notify.Message, err error)
}

// notifyDue queues the notifications of the node's state in the profile
// that are due, records them as sent (in the same write as the rest of the
// record, so a restart does not send them again; they are queued only once
// the write succeeded), and returns when the next one is due.
func (r *Reconciler) notifyDue(p *pass, c *fleet.Compiled, name string) time.Duration {
	node, record, now := p.want, &p.record, p.now
	pr := record.Profiles[name]
	var requeue time.Duration
	for _, n := range c.Notify[pr.Current] {
		due, next := n.Due(pr.Current, pr.Since.Time, pr.Notified[n.Name].Time, now)
		requeue = shortest(requeue, until(next, now))
		if !due {
			continue
		}
		record.Notified(name, n.Name, now)
		p.later(r.sendLater(n, r.notifyData(node, *record, name, notify.Event{})))
	}
	return requeue
}

// notifyData is what a notification of profile name says about the node.
func (r *Reconciler) notifyData(node *corev1.Node, record engine.Record, name string, e notify.Event) notify.Data {
	pr := record.Profiles[name]
	state := pr.Current
	if state == "" {
		state = pitstopv1alpha1.StateOperational
	}
	return notify.Data{
		Node: node.DeepCopy(), State: string(state), Previous: string(pr.Previous), Since: pr.Since.Time,
		Profile:  notify.Profiles{Current: name, Last: record.LastMoved()},
		Blocking: r.Decisions(node.Name)[name].Blocking(), Checks: pr.Checks, Event: e,
	}
}

// sendLater renders a notification now and returns what queues it (or
// reports why it cannot be rendered).
func (r *Reconciler) sendLater(n *notify.Notification, d notify.Data) func() {
	msg, err := n.Render(d.Profile.Current, d)
	return func() {
		if err != nil {
			r.notifier.Failed(d.Node, msg, err)
			return
		}
		r.notifier.Enqueue(d.Node, msg)
	}
}

// NotifyDeadlineAtRisk sends the deadlineAtRisk notifications of every
// profile that selects the node: its scheduled event e was just found at
// risk of missing its deadline. Each says the node's state in its profile
// and what holds it there.
func (r *Reconciler) NotifyDeadlineAtRisk(ctx context.Context, node *corev1.Node, e notify.Event) error {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := r.client.List(ctx, list); err != nil {
		return err
	}
	record, err := engine.ReadRecord(node)
	if err != nil {
		return err
	}
	names, specs, _ := r.selected(list.Items, node)
	for _, name := range names {
		for _, n := range specs[name].AtRisk {
			r.sendLater(n, r.notifyData(node, record, name, e))()
		}
	}
	return nil
}
