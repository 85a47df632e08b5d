package localcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// SampleNamespace holds the sample workloads.
const SampleNamespace = "demo"

// Workloads is a set of objects to run on a cluster. Create them with
// Cluster.Apply.
type Workloads struct {
	Namespace    *corev1.Namespace
	Services     []*corev1.Service
	Deployments  []*appsv1.Deployment
	StatefulSets []*appsv1.StatefulSet
	DaemonSets   []*appsv1.DaemonSet
	PDBs         []*policyv1.PodDisruptionBudget
	Pods         []*corev1.Pod
}

// SampleWorkloads is what a platform team's worker nodes typically carry:
// Deployments guarded by PodDisruptionBudgets (web: 10 replicas, at most one
// down; api: 6 replicas, at least half up), a StatefulSet with its budget, a
// DaemonSet on every node, and one bare pod no controller would recreate, on
// the first worker.
func SampleWorkloads() Workloads {
	ns := SampleNamespace
	return Workloads{
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		Services: []*corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  appLabels("db"),
				Ports:     []corev1.ServicePort{{Name: "db", Port: 5432}},
			},
		}},
		Deployments: []*appsv1.Deployment{Deployment(ns, "web", 10), Deployment(ns, "api", 6)},
		StatefulSets: []*appsv1.StatefulSet{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To[int32](3),
				ServiceName:         "db",
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: appLabels("db")},
				Template:            podTemplate("db"),
			},
		}},
		DaemonSets: []*appsv1.DaemonSet{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: appLabels("node-agent")},
				Template: func() corev1.PodTemplateSpec {
					t := podTemplate("node-agent")
					t.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
					return t
				}(),
			},
		}},
		PDBs: []*policyv1.PodDisruptionBudget{
			PDB(ns, "web", &intstr.IntOrString{Type: intstr.Int, IntVal: 1}, nil),
			PDB(ns, "api", nil, &intstr.IntOrString{Type: intstr.String, StrVal: "50%"}),
			PDB(ns, "db", &intstr.IntOrString{Type: intstr.Int, IntVal: 1}, nil),
		},
		Pods: []*corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debug", Labels: appLabels("debug")},
			Spec: func() corev1.PodSpec {
				// Pinned to the first worker, so the demo knows which node a
				// drain will find it on (it blocks a drain: nothing recreates it).
				spec := podTemplate("debug").Spec
				spec.NodeSelector = map[string]string{corev1.LabelHostname: workerName(0)}
				return spec
			}(),
		}},
	}
}

// Deployment returns a Deployment of replicas pods labelled app=name.
func Deployment(namespace, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: appLabels(name)},
			Template: podTemplate(name),
		},
	}
}

// PDB returns a PodDisruptionBudget over the pods labelled app=name, with
// either maxUnavailable or minAvailable set.
func PDB(namespace, name string, maxUnavailable, minAvailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: appLabels(name)},
			MaxUnavailable: maxUnavailable,
			MinAvailable:   minAvailable,
		},
	}
}

func appLabels(name string) map[string]string { return map[string]string{"app": name} }

// podTemplate is a small pod that kwok runs; the image is never pulled.
func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: appLabels(app)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  app,
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}
}

// ApplySampleWorkloads creates SampleWorkloads.
func (c *Cluster) ApplySampleWorkloads(ctx context.Context) error {
	return c.Apply(ctx, SampleWorkloads())
}

// Apply creates the workloads; objects that already exist are left alone.
func (c *Cluster) Apply(ctx context.Context, w Workloads) error {
	core, apps, policy := c.Clientset.CoreV1(), c.Clientset.AppsV1(), c.Clientset.PolicyV1()
	var errs []error
	check := func(kind, name string, err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating %s %s: %w", kind, name, err))
		}
	}
	opts := metav1.CreateOptions{}
	if w.Namespace != nil {
		_, err := core.Namespaces().Create(ctx, w.Namespace, opts)
		check("Namespace", w.Namespace.Name, err)
	}
	for _, o := range w.Services {
		_, err := core.Services(o.Namespace).Create(ctx, o, opts)
		check("Service", o.Namespace+"/"+o.Name, err)
	}
	for _, o := range w.PDBs {
		_, err := policy.PodDisruptionBudgets(o.Namespace).Create(ctx, o, opts)
		check("PodDisruptionBudget", o.Namespace+"/"+o.Name, err)
	}
	for _, o := range w.Deployments {
		_, err := apps.Deployments(o.Namespace).Create(ctx, o, opts)
		check("Deployment", o.Namespace+"/"+o.Name, err)
	}
	for _, o := range w.StatefulSets {
		_, err := apps.StatefulSets(o.Namespace).Create(ctx, o, opts)
		check("StatefulSet", o.Namespace+"/"+o.Name, err)
	}
	for _, o := range w.DaemonSets {
		_, err := apps.DaemonSets(o.Namespace).Create(ctx, o, opts)
		check("DaemonSet", o.Namespace+"/"+o.Name, err)
	}
	for _, o := range w.Pods {
		_, err := core.Pods(o.Namespace).Create(ctx, o, opts)
		check("Pod", o.Namespace+"/"+o.Name, err)
	}
	return errors.Join(errs...)
}

// AwaitWorkloads waits until every Deployment, StatefulSet and DaemonSet in
// namespace has all its replicas ready and every pod in it is Running.
func (c *Cluster) AwaitWorkloads(ctx context.Context, namespace string) error {
	var pending string
	err := c.poll(ctx, 200*time.Millisecond, "workloads in namespace "+namespace+" to run", func(ctx context.Context) (bool, error) {
		var err error
		pending, err = c.pendingWorkload(ctx, namespace)
		return err == nil && pending == "", nil
	})
	if err != nil && pending != "" {
		return fmt.Errorf("%w: %s", err, pending)
	}
	return err
}

// pendingWorkload names one workload in namespace that is not fully running
// yet, or returns "" when all are.
func (c *Cluster) pendingWorkload(ctx context.Context, namespace string) (string, error) {
	apps := c.Clientset.AppsV1()
	deployments, err := apps.Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, d := range deployments.Items {
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas != want || d.Status.UpdatedReplicas != want {
			return fmt.Sprintf("Deployment %s/%s has %d of %d replicas available", namespace, d.Name, d.Status.AvailableReplicas, want), nil
		}
	}
	statefulSets, err := apps.StatefulSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, s := range statefulSets.Items {
		want := ptr.Deref(s.Spec.Replicas, 1)
		if s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas != want {
			return fmt.Sprintf("StatefulSet %s/%s has %d of %d replicas ready", namespace, s.Name, s.Status.ReadyReplicas, want), nil
		}
	}
	daemonSets, err := apps.DaemonSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, d := range daemonSets.Items {
		if d.Status.ObservedGeneration < d.Generation || d.Status.DesiredNumberScheduled == 0 || d.Status.NumberReady != d.Status.DesiredNumberScheduled {
			return fmt.Sprintf("DaemonSet %s/%s has %d of %d pods ready", namespace, d.Name, d.Status.NumberReady, d.Status.DesiredNumberScheduled), nil
		}
	}
	pods, err := c.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Sprintf("Pod %s/%s is %s", namespace, p.Name, p.Status.Phase), nil
		}
	}
	return "", nil
}
