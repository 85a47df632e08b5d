// Package seedmetrics exports, with --smc-compat, the maintenance-
// controller's own metrics beside pitstop's, under its names and labels,
// so that the dashboards and alerts its users built keep working:
//
//   - maintenance_controller_pod_shuffle_count{owner, profile}: pods of
//     Deployments, StatefulSets and DaemonSets (owner "deployment_<name>",
//     "stateful_set_<name>", "daemon_set_<name>", or "replica_set_<name>"
//     for a ReplicaSet of its own) on a node when it went into maintenance
//     for profile, likely moved by it;
//   - maintenance_controller_pod_shuffles_per_replica{owner, profile}: the
//     same, each pod counting 1/replicas of its owner at that time;
//   - maintenance_controller_transition_failure_count{profile}: transitions
//     that could not be taken.
//
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get
package seedmetrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	shuffles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maintenance_controller_pod_shuffle_count",
		Help: "Pods of DaemonSets, Deployments and StatefulSets on a node when it went into maintenance, likely moved by it (the maintenance-controller's metric, with --smc-compat).",
	}, []string{"owner", "profile"})
	shufflesPerReplica = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maintenance_controller_pod_shuffles_per_replica",
		Help: "Pods of DaemonSets, Deployments and StatefulSets on a node when it went into maintenance, each divided by its owner's replica count then (the maintenance-controller's metric, with --smc-compat).",
	}, []string{"owner", "profile"})
	transitionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maintenance_controller_transition_failure_count",
		Help: "Transitions that passed their check but could not be taken, a trigger or a budget slot failing (the maintenance-controller's metric, with --smc-compat).",
	}, []string{"profile"})

	register sync.Once
)

// Recorder counts the maintenance-controller's metrics. Its methods do
// nothing on a nil Recorder, so that callers need not ask whether
// --smc-compat is on.
type Recorder struct {
	// reader reads pods' owners from the API server: pitstop's cache holds
	// no workloads, and this is read once per node going into maintenance.
	reader client.Reader

	mu sync.Mutex
	// counted holds, per node and profile, when the node entered the
	// state it leaves for maintenance: its pods are counted once for each
	// such entry, however many evaluations its triggers take.
	counted map[string]time.Time
}

// New returns a Recorder, registering the metrics with controller-runtime's
// registry (which /metrics serves) the first time.
func New(reader client.Reader) *Recorder {
	register.Do(func() { metrics.Registry.MustRegister(shuffles, shufflesPerReplica, transitionFailures) })
	return &Recorder{reader: reader, counted: map[string]time.Time{}}
}

// TransitionFailed counts a transition of profile that could not be taken.
func (r *Recorder) TransitionFailed(profile string) {
	if r != nil {
		transitionFailures.WithLabelValues(profile).Inc()
	}
}

// Entering counts the pods on node as it goes into maintenance for
// profile, having been in its current state since since: once for that
// entry. An owner that cannot be read is left out.
func (r *Recorder) Entering(ctx context.Context, node string, pods []corev1.Pod, profile string, since time.Time) {
	if r == nil {
		return
	}
	key := node + "/" + profile
	r.mu.Lock()
	if at, ok := r.counted[key]; ok && at.Equal(since) {
		r.mu.Unlock()
		return
	}
	r.counted[key] = since
	r.mu.Unlock()
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ref := range p.OwnerReferences {
			owner, replicas, err := r.owner(ctx, p, ref)
			if err != nil {
				log.FromContext(ctx).V(1).Info("reading a pod's owner for the shuffle metrics", "pod", client.ObjectKeyFromObject(p), "error", err.Error())
			}
			if owner == "" {
				continue
			}
			shuffles.WithLabelValues(owner, profile).Inc()
			shufflesPerReplica.WithLabelValues(owner, profile).Add(1 / float64(max(replicas, 1)))
		}
	}
}

// Forget drops what Entering remembers of node in profile: it has moved.
func (r *Recorder) Forget(node, profile string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.counted, node+"/"+profile)
	r.mu.Unlock()
}

// owner names the workload a pod belongs to, as the maintenance-controller
// does, with its replica count (a DaemonSet's Ready pods); "" for an owner
// that is none of those, or that could not be read (err).
func (r *Recorder) owner(ctx context.Context, p *corev1.Pod, ref metav1.OwnerReference) (string, int32, error) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
	switch ref.Kind {
	case "DaemonSet":
		ds := &appsv1.DaemonSet{}
		if err := r.reader.Get(ctx, key, ds); err != nil {
			return "", 0, err
		}
		return "daemon_set_" + ds.Name, ds.Status.NumberReady, nil
	case "StatefulSet":
		sts := &appsv1.StatefulSet{}
		if err := r.reader.Get(ctx, key, sts); err != nil {
			return "", 0, err
		}
		return "stateful_set_" + sts.Name, replicasOf(sts.Spec.Replicas), nil
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := r.reader.Get(ctx, key, rs); err != nil {
			return "", 0, err
		}
		for _, o := range rs.OwnerReferences {
			if o.Kind != "Deployment" {
				continue
			}
			d := &appsv1.Deployment{}
			if err := r.reader.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: o.Name}, d); err != nil {
				return "", 0, err
			}
			return "deployment_" + d.Name, replicasOf(d.Spec.Replicas), nil
		}
		if len(rs.OwnerReferences) > 0 {
			return "", 0, nil // owned by something else than a Deployment
		}
		return "replica_set_" + rs.Name, replicasOf(rs.Spec.Replicas), nil
	}
	return "", 0, nil
}

func replicasOf(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}
