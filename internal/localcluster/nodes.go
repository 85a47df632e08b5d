package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/sync/errgroup"

	"github.com/pitstop-dev/pitstop/internal/kwoknode"
)

const (
	// AnnotationKwokNode marks the nodes kwok plays the kubelet for: a node
	// without it gets no heartbeat.
	AnnotationKwokNode = kwoknode.Annotation

	// LabelControlPlane marks control-plane nodes, as kubeadm does.
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelWorker marks worker nodes.
	LabelWorker = "node-role.kubernetes.io/worker"
	// LabelZone is the well-known zone label.
	LabelZone = corev1.LabelTopologyZone
)

// NodeNames returns the names of the cluster's nodes as Start made them:
// control-plane nodes first, then workers, then the real node if any.
func (c *Cluster) NodeNames() []string {
	names := make([]string, 0, c.opts.ControlPlaneNodes+c.opts.Workers+1)
	for i := range c.opts.ControlPlaneNodes {
		names = append(names, controlPlaneName(i))
	}
	for i := range c.opts.Workers {
		names = append(names, workerName(i))
	}
	if c.opts.RealNode {
		names = append(names, RealNodeName)
	}
	return names
}

func controlPlaneName(i int) string { return fmt.Sprintf("control-plane-%d", i) }
func workerName(i int) string       { return fmt.Sprintf("worker-%03d", i) }

// desiredNodes is every node Start creates.
func (c *Cluster) desiredNodes() []*corev1.Node {
	var nodes []*corev1.Node
	zone := func(i int) string {
		if len(c.opts.Zones) == 0 {
			return ""
		}
		return c.opts.Zones[i%len(c.opts.Zones)]
	}
	for i := range c.opts.ControlPlaneNodes {
		n := kwoknode.New(controlPlaneName(i), len(nodes), zone(i), c.opts.PodsPerNode, map[string]string{LabelControlPlane: ""})
		n.Spec.Taints = []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
		nodes = append(nodes, n)
	}
	for i := range c.opts.Workers {
		labels := map[string]string{LabelWorker: ""}
		for k, v := range c.opts.NodeLabels {
			labels[k] = v
		}
		nodes = append(nodes, kwoknode.New(workerName(i), len(nodes), zone(i), c.opts.PodsPerNode, labels))
	}
	return nodes
}

// createNodes creates the nodes, a few at a time.
func (c *Cluster) createNodes(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, node := range c.desiredNodes() {
		g.Go(func() error {
			_, err := c.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating node %s: %w", node.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// awaitNodesReady waits until every node reports Ready and the node
// lifecycle controller has lifted the not-ready taint, so pods can be
// scheduled on all of them.
func (c *Cluster) awaitNodesReady(ctx context.Context) error {
	want := len(c.NodeNames())
	return c.poll(ctx, 200*time.Millisecond, fmt.Sprintf("%d nodes to become Ready", want), func(ctx context.Context) (bool, error) {
		nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range nodes.Items {
			if IsNodeSchedulable(&nodes.Items[i]) {
				ready++
			}
		}
		return ready >= want, nil
	})
}

// IsNodeSchedulable reports whether a node is Ready and free of the taints
// the control plane puts on nodes that are not (not-ready, unreachable).
func IsNodeSchedulable(node *corev1.Node) bool {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}
