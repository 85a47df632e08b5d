package check

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestDeadline(t *testing.T) {
	notBefore := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	startBy := time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)
	withEvent := node("n1", pitstopv1alpha1.LabelScheduledEvent, "instance-retirement")
	withEvent.Annotations[pitstopv1alpha1.AnnotationScheduledEventNotBefore] = notBefore.Format(time.RFC3339)
	withEvent.Annotations[pitstopv1alpha1.AnnotationScheduledEventStartBy] = startBy.Format(time.RFC3339)
	without := node("n2")
	within := func(d time.Duration) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{Deadline: &pitstopv1alpha1.DeadlineCheck{Within: &pitstopv1alpha1.Duration{Duration: d}}}
	}
	atStart := pitstopv1alpha1.CheckInstance{Deadline: &pitstopv1alpha1.DeadlineCheck{}}
	at := func(n *corev1.Node, now time.Time) Context { return Context{Node: n, Now: now} }

	runCases(t, map[string]evalCase{
		"a node without an event fails it": {
			inst: within(6 * time.Hour),
			ctx:  at(&without, notBefore),
			want: Result{Reason: "no scheduled cloud event"},
		},
		"fails more than `within` before the start, and says when it passes": {
			inst: within(6 * time.Hour),
			ctx:  at(&withEvent, notBefore.Add(-7*time.Hour)),
			want: Result{
				Reason:     "instance-retirement starts at 2026-12-03 02:00 UTC; passes 6h before it, at 2026-12-02 20:00 UTC (in 1h)",
				NextChange: notBefore.Add(-6 * time.Hour),
			},
		},
		"passes `within` before the start": {
			inst: within(6 * time.Hour),
			ctx:  at(&withEvent, notBefore.Add(-6*time.Hour)),
			want: Result{Passed: true, Reason: "instance-retirement starts at 2026-12-03 02:00 UTC, within 6h"},
		},
		"without `within`, fails before the latest safe start": {
			inst: atStart,
			ctx:  at(&withEvent, startBy.Add(-90*time.Minute)),
			want: Result{Reason: "instance-retirement: passes at its latest safe start 2026-12-02 23:00 UTC (in 1h30m)", NextChange: startBy},
		},
		"without `within`, passes from the latest safe start on": {
			inst: atStart,
			ctx:  at(&withEvent, startBy.Add(time.Minute)),
			want: Result{Passed: true, Reason: "instance-retirement: its latest safe start 2026-12-02 23:00 UTC has come"},
		},
	})

	noStartBy := node("n3", pitstopv1alpha1.LabelScheduledEvent, "system-reboot")
	c, err := New(atStart, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Evaluate(t.Context(), at(&noStartBy, notBefore))
	if err != nil || res.Passed || !strings.Contains(res.Reason, "latest safe start is unknown") {
		t.Errorf("a node whose start-by is unknown: %+v, %v", res, err)
	}
	bad := node("n4", pitstopv1alpha1.LabelScheduledEvent, "system-reboot")
	bad.Annotations[pitstopv1alpha1.AnnotationScheduledEventStartBy] = "tomorrow"
	if _, err := c.Evaluate(t.Context(), at(&bad, notBefore)); err == nil || !strings.Contains(err.Error(), pitstopv1alpha1.AnnotationScheduledEventStartBy) {
		t.Errorf("an unreadable annotation: %v", err)
	}
	if _, err := New(within(0), Deps{}); err == nil || err.Error() != "deadline.within: must be positive, got 0s" {
		t.Errorf("within 0: %v", err)
	}
}
