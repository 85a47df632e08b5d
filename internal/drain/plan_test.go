package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func skippedNames(s []Skipped) map[string]SkipReason {
	out := map[string]SkipReason{}
	for _, x := range s {
		out[x.Pod.Name] = x.Reason
	}
	return out
}

func mirror() testutil.PodOption {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	}
}

func terminating() testutil.PodOption {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)} }
}

func priority(class string) testutil.PodOption {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = class }
}

func tolerations(ts ...corev1.Toleration) testutil.PodOption {
	return func(p *corev1.Pod) { p.Spec.Tolerations = ts }
}

func TestNewPlan(t *testing.T) {
	rs := testutil.OwnedBy("ReplicaSet", "web-abc")
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		opts        Options
		evict       []string
		waiting     []string
		delete      []string
		terminating []string
		blocked     []string
		skipped     map[string]SkipReason
	}{
		{
			name:  "evicts controller-managed pods in namespace/name order",
			pods:  []*corev1.Pod{testutil.Pod("b", "web-2", rs), testutil.Pod("a", "web-9", rs), testutil.Pod("b", "web-1", rs)},
			evict: []string{"web-9", "web-1", "web-2"},
		},
		{
			name:    "leaves DaemonSet and mirror pods on the node",
			pods:    []*corev1.Pod{testutil.Pod("kube-system", "agent", testutil.OwnedBy("DaemonSet", "agent")), testutil.Pod("kube-system", "etcd-node1", mirror()), testutil.Pod("a", "web", rs)},
			evict:   []string{"web"},
			skipped: map[string]SkipReason{"agent": SkipDaemonSet, "etcd-node1": SkipMirror},
		},
		{
			name:        "waits for pods already terminating instead of evicting them again",
			pods:        []*corev1.Pod{testutil.Pod("a", "old", rs, terminating()), testutil.Pod("a", "web", rs)},
			evict:       []string{"web"},
			terminating: []string{"old"},
		},
		{
			name:   "deletes finished pods directly",
			pods:   []*corev1.Pod{testutil.Pod("a", "job-done", testutil.OwnedBy("Job", "j"), testutil.WithPhase(corev1.PodSucceeded)), testutil.Pod("a", "crashed", testutil.WithPhase(corev1.PodFailed))},
			delete: []string{"crashed", "job-done"},
		},
		{
			name:    "blocks on a pod without a controller by default",
			pods:    []*corev1.Pod{testutil.Pod("a", "bare"), testutil.Pod("a", "web", rs)},
			evict:   []string{"web"},
			blocked: []string{"bare"},
		},
		{
			name:  "evicts a pod without a controller when unmanagedPods is Delete",
			pods:  []*corev1.Pod{testutil.Pod("a", "bare")},
			opts:  Options{DeleteUnmanaged: true},
			evict: []string{"bare"},
		},
		{
			name:  "evicts pods with local storage, as --delete-emptydir-data does",
			pods:  []*corev1.Pod{testutil.Pod("a", "cache", rs, testutil.WithEmptyDir())},
			evict: []string{"cache"},
		},
		{
			name:    "leaves pods matching skipPodsSelector, even unmanaged ones",
			pods:    []*corev1.Pod{testutil.Pod("a", "keep", testutil.WithPodLabels(map[string]string{"drain": "skip"})), testutil.Pod("a", "web", rs)},
			opts:    Options{Skip: labels.SelectorFromSet(labels.Set{"drain": "skip"})},
			evict:   []string{"web"},
			skipped: map[string]SkipReason{"keep": SkipSelected},
		},
		{
			name:    "holds critical pods back while ordinary pods remain",
			pods:    []*corev1.Pod{testutil.Pod("kube-system", "dns", rs, priority("system-cluster-critical")), testutil.Pod("a", "web", rs)},
			evict:   []string{"web"},
			waiting: []string{"dns"},
		},
		{
			name:    "holds critical pods back while an ordinary pod is still terminating",
			pods:    []*corev1.Pod{testutil.Pod("kube-system", "dns", rs, priority("system-node-critical")), testutil.Pod("a", "web", rs, terminating())},
			waiting: []string{"dns"}, terminating: []string{"web"},
		},
		{
			name:  "evicts critical pods once only they are left",
			pods:  []*corev1.Pod{testutil.Pod("kube-system", "dns", rs, func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](2_000_001_000) })},
			evict: []string{"dns"},
		},
		{
			name: "leaves a managed pod that tolerates every taint: evicted, its replacement would come straight back",
			pods: []*corev1.Pod{
				testutil.Pod("a", "agent", rs, tolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})),
				testutil.Pod("a", "web", rs),
			},
			evict:   []string{"web"},
			skipped: map[string]SkipReason{"agent": SkipToleratesCordon},
		},
		{
			name: "leaves a managed pod that tolerates both taints of the cordon by key",
			pods: []*corev1.Pod{testutil.Pod("a", "agent", rs, tolerations(
				corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				corev1.Toleration{Key: "pitstop.dev/drain", Operator: corev1.TolerationOpExists},
			))},
			skipped: map[string]SkipReason{"agent": SkipToleratesCordon},
		},
		{
			name: "evicts a pod that tolerates the cordon but not pitstop's taint: the scheduler keeps its replacement away",
			pods: []*corev1.Pod{testutil.Pod("a", "web", rs, tolerations(
				corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			))},
			evict: []string{"web"},
		},
		{
			name: "evicts a pod whose every-taint toleration is NoExecute only",
			pods: []*corev1.Pod{testutil.Pod("a", "web", rs, tolerations(
				corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			))},
			evict: []string{"web"},
		},
		{
			name:    "still blocks on a pod without a controller that tolerates every taint: nothing brings it back",
			pods:    []*corev1.Pod{testutil.Pod("a", "bare", tolerations(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
			blocked: []string{"bare"},
		},
		{
			name:    "is done when only skipped pods are left",
			pods:    []*corev1.Pod{testutil.Pod("kube-system", "agent", testutil.OwnedBy("DaemonSet", "agent"))},
			skipped: map[string]SkipReason{"agent": SkipDaemonSet},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := make([]corev1.Pod, len(tc.pods))
			for i, p := range tc.pods {
				pods[i] = *p
			}
			p := NewPlan(pods, tc.opts)
			check := func(what string, got, want []string) {
				t.Helper()
				if len(got) != len(want) {
					t.Errorf("%s = %v, want %v", what, got, want)
					return
				}
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("%s = %v, want %v", what, got, want)
						return
					}
				}
			}
			check("evict", testutil.PodNames(p.Evict), tc.evict)
			check("waiting", testutil.PodNames(p.Waiting), tc.waiting)
			check("delete", testutil.PodNames(p.Delete), tc.delete)
			check("terminating", testutil.PodNames(p.Terminating), tc.terminating)
			var blocked []string
			for _, b := range p.Blocked {
				blocked = append(blocked, b.Pod.Name)
				if b.Reason != BlockUnmanaged {
					t.Errorf("blocked %s for %s", b.Pod.Name, b.Reason)
				}
			}
			check("blocked", blocked, tc.blocked)
			gotSkipped := skippedNames(p.Skipped)
			if len(gotSkipped) != len(tc.skipped) {
				t.Errorf("skipped = %v, want %v", gotSkipped, tc.skipped)
			}
			for name, reason := range tc.skipped {
				if gotSkipped[name] != reason {
					t.Errorf("skipped[%s] = %q, want %q", name, gotSkipped[name], reason)
				}
			}
			wantRemaining := len(tc.evict) + len(tc.waiting) + len(tc.delete) + len(tc.terminating) + len(tc.blocked)
			if p.Remaining() != wantRemaining || p.Done() != (wantRemaining == 0) || len(p.Pending()) != wantRemaining {
				t.Errorf("Remaining=%d Done=%v Pending=%d, want %d remaining", p.Remaining(), p.Done(), len(p.Pending()), wantRemaining)
			}
		})
	}
}

func TestCoveringPDB(t *testing.T) {
	pdb := func(ns, name string, sel map[string]string) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
		}
	}
	pdbs := []policyv1.PodDisruptionBudget{
		pdb("other", "web", map[string]string{"app": "web"}),
		pdb("shop", "empty", map[string]string{}),
		pdb("shop", "web", map[string]string{"app": "web"}),
	}
	web := testutil.Pod("shop", "web-1", testutil.WithPodLabels(map[string]string{"app": "web"}))
	if got := CoveringPDB(web, pdbs); got == nil || got.Namespace != "shop" || got.Name != "web" {
		t.Errorf("CoveringPDB(web) = %v, want shop/web (same namespace, non-empty selector)", got)
	}
	api := testutil.Pod("shop", "api-1", testutil.WithPodLabels(map[string]string{"app": "api"}))
	if got := CoveringPDB(api, pdbs); got != nil {
		t.Errorf("CoveringPDB(api) = %s, want none", got.Name)
	}
	p := pdbs[2]
	p.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 9, DesiredHealthy: 9, ExpectedPods: 10}
	if got, want := PDBMessage(&p), "PodDisruptionBudget shop/web allows 0 disruptions (9 of 10 pods healthy, 9 needed)"; got != want {
		t.Errorf("PDBMessage = %q, want %q", got, want)
	}
	// Two evictions admitted but whose pods are not deleted: every pod is
	// healthy, yet the budget allows nothing until they are forgotten.
	evicted := time.Date(2026, 11, 26, 14, 13, 0, 0, time.UTC)
	p.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 12, DesiredHealthy: 10, ExpectedPods: 12,
		DisruptedPods: map[string]metav1.Time{"web-a": metav1.NewTime(evicted), "web-b": metav1.NewTime(evicted.Add(-time.Second))}}
	if got, want := PDBMessage(&p), "PodDisruptionBudget shop/web allows 0 disruptions (12 of 12 pods healthy, 10 needed; 2 pods counted as being evicted until 2026-11-26T14:15:00Z at the latest)"; got != want {
		t.Errorf("PDBMessage = %q, want %q", got, want)
	}
}

func TestStaleStatus(t *testing.T) {
	gap := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	pdb := func(generation, observed int64) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: generation},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: observed, DisruptionsAllowed: 1},
		}
	}
	for _, tc := range []struct {
		name      string
		pdb       *policyv1.PodDisruptionBudget
		view      StatusView
		now       time.Time
		stale     bool
		wantUntil time.Time
	}{
		{name: "trusts a current budget when no gap was seen", pdb: pdb(2, 2), now: gap},
		{name: "distrusts a budget whose observedGeneration lags, with no end but its change", pdb: pdb(3, 2), now: gap, stale: true},
		{name: "distrusts a lagging budget even long after a gap", pdb: pdb(3, 2), view: StatusView{Gap: gap, Settle: time.Minute}, now: gap.Add(time.Hour), stale: true},
		{
			name: "distrusts a budget unchanged since a gap until the settle period ends",
			pdb:  pdb(2, 2), view: StatusView{Gap: gap, Settle: 30 * time.Second}, now: gap.Add(10 * time.Second),
			stale: true, wantUntil: gap.Add(30 * time.Second),
		},
		{name: "trusts a budget unchanged since a gap once the settle period has passed", pdb: pdb(2, 2), view: StatusView{Gap: gap, Settle: 30 * time.Second}, now: gap.Add(30 * time.Second)},
		{name: "trusts a budget whose status changed after the gap", pdb: pdb(2, 2), view: StatusView{Gap: gap, Changed: gap.Add(time.Second), Settle: 30 * time.Second}, now: gap.Add(2 * time.Second)},
		{
			name: "distrusts a budget whose last change came before the gap",
			pdb:  pdb(2, 2), view: StatusView{Gap: gap, Changed: gap.Add(-time.Second), Settle: 30 * time.Second}, now: gap.Add(time.Second),
			stale: true, wantUntil: gap.Add(30 * time.Second),
		},
		{name: "trusts at once with no settle period", pdb: pdb(2, 2), view: StatusView{Gap: gap}, now: gap},
		{
			name: "trusts an unchanged budget after a gap when it allows no disruption: the API server refuses on it anyway",
			pdb: func() *policyv1.PodDisruptionBudget {
				p := pdb(2, 2)
				p.Status.DisruptionsAllowed = 0
				return p
			}(),
			view: StatusView{Gap: gap, Settle: 30 * time.Second}, now: gap.Add(time.Second),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, until := StaleStatus(tc.pdb, tc.view, tc.now)
			if (why != "") != tc.stale {
				t.Fatalf("StaleStatus = %q, want stale=%v", why, tc.stale)
			}
			if tc.stale && !strings.Contains(why, "waiting for PodDisruptionBudget shop/web status to be current") {
				t.Errorf("StaleStatus = %q, want it to name the budget and what is awaited", why)
			}
			if !until.Equal(tc.wantUntil) {
				t.Errorf("until = %s, want %s", until, tc.wantUntil)
			}
		})
	}
}
