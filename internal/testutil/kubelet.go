package testutil

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet plays the kubelet of every node for an envtest API server, which
// has none: it marks pods bound to a node Running and Ready, and finishes
// the deletion of pods that are terminating (what a kubelet does once their
// containers stopped). It runs until the test ends.
func Kubelet(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || pod.Spec.NodeName == "" {
					continue
				}
				actAsKubelet(ctx, cs, pod)
			}
			w.Stop()
		}
	}()
}

func actAsKubelet(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) {
	pods := cs.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	case pod.Status.Phase == corev1.PodPending:
		running := pod.DeepCopy()
		running.Status.Phase = corev1.PodRunning
		running.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		_, _ = pods.UpdateStatus(ctx, running, metav1.UpdateOptions{})
	}
}

// SetPodReady writes p's status as a kubelet would for a running pod
// that is Ready or not, retrying on conflicts.
func SetPodReady(t testing.TB, c client.Client, p *corev1.Pod, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return c.Status().Update(context.Background(), p)
	})
}
