package nodemaintenance

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestAnAcceptedEvictionIsNotAskedAgainWhileTheCacheLags: a pod whose
// eviction was accepted is evicted again only once the cache shows it in a
// newer version that is still not terminating; while the cache shows it as
// it was evicted, it is left alone however long that takes. A pod already
// terminating (a drain's timeout force-deletes it) is deleted again every
// expectationTTL.
func TestAnAcceptedEvictionIsNotAskedAgainWhileTheCacheLags(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pod := func(uid, version string, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), ResourceVersion: version}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return p
	}
	e := newExpectations()
	e.record("nm", drain.Result{Pods: []drain.PodResult{
		{Pod: pod("a", "5", false), Outcome: drain.Evicted},
		{Pod: pod("b", "7", false), Outcome: drain.Evicted},
		{Pod: pod("c", "9", true), Outcome: drain.Deleted},
		{Pod: pod("d", "3", false), Outcome: drain.Refused},
	}}, t0)

	for _, tc := range []struct {
		name  string
		after time.Duration
		pods  []*corev1.Pod
		want  []string
	}{
		{"within the TTL nothing asked for is asked again", 5 * time.Second,
			[]*corev1.Pod{pod("a", "5", false), pod("b", "8", false), pod("c", "9", true), pod("d", "3", false)}, []string{"d"}},
		{"past the TTL, a cache that still shows the evicted version lags", time.Minute,
			[]*corev1.Pod{pod("a", "5", false)}, nil},
		{"past the TTL, a newer version still not terminating is evicted again", time.Minute,
			[]*corev1.Pod{pod("a", "5", false), pod("b", "8", false)}, []string{"b"}},
		{"past the TTL, a pod still terminating is deleted again", 11 * time.Second,
			[]*corev1.Pod{pod("c", "9", true)}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testutil.PodNames(e.filter("nm", tc.pods, t0.Add(tc.after))); !slices.Equal(got, tc.want) {
				t.Errorf("filter = %v, want %v", got, tc.want)
			}
		})
	}

	// What is no longer listed (terminating, or gone) is forgotten once the
	// TTL has passed: listed again, it would be asked for at once.
	e.filter("nm", nil, t0.Add(2*time.Minute))
	if got := testutil.PodNames(e.filter("nm", []*corev1.Pod{pod("a", "5", false)}, t0.Add(2*time.Minute))); !slices.Equal(got, []string{"a"}) {
		t.Errorf("after the pods left the list: filter = %v, want [a]", got)
	}
	// Forgotten within the TTL it is not.
	e.record("nm", drain.Result{Pods: []drain.PodResult{{Pod: pod("e", "1", false), Outcome: drain.Evicted}}}, t0.Add(3*time.Minute))
	e.filter("nm", nil, t0.Add(3*time.Minute+time.Second))
	if got := e.filter("nm", []*corev1.Pod{pod("e", "1", false)}, t0.Add(3*time.Minute+2*time.Second)); len(got) != 0 {
		t.Errorf("a pod evicted 2 s ago and briefly not listed: filter = %v, want none", testutil.PodNames(got))
	}
}
