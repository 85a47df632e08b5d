package machineset

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	set := types.NamespacedName{Namespace: "ns", Name: "workers"}
	other := types.NamespacedName{Namespace: "ns", Name: "others"}
	for _, tc := range []struct {
		name     string
		steps    func(e *expectations, clk *clocktesting.FakePassiveClock)
		wantOK   bool
		wantWait time.Duration
	}{{
		name:   "a set that did nothing may act",
		steps:  func(*expectations, *clocktesting.FakePassiveClock) {},
		wantOK: true,
	}, {
		name: "a set waits until every creation is seen",
		steps: func(e *expectations, clk *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 3)
			clk.SetTime(epoch.Add(10 * time.Second))
			e.creationObserved(set)
			e.creationObserved(set)
		},
		wantWait: 50 * time.Second,
	}, {
		name: "a set may act once every creation is seen",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 2)
			e.creationObserved(set)
			e.creationObserved(set)
		},
		wantOK: true,
	}, {
		name: "creations seen by another set do not count",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 1)
			e.creationObserved(other)
		},
		wantWait: time.Minute,
	}, {
		name: "a set waits until every machine it deleted is seen deleting",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectDeletions(set, "uid-a", "uid-b")
			e.deletionObserved(set, "uid-a")
			e.deletionObserved(set, "uid-a")
		},
		wantWait: time.Minute,
	}, {
		name: "the deletion of a machine the set did not delete does not count",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectDeletions(set, "uid-a")
			e.deletionObserved(set, "uid-someone-elses")
		},
		wantWait: time.Minute,
	}, {
		name: "a set may act once every deletion is seen",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectDeletions(set, "uid-a", "uid-b")
			e.deletionObserved(set, "uid-b")
			e.deletionObserved(set, "uid-a")
		},
		wantOK: true,
	}, {
		name: "a set stops waiting when the timeout passes",
		steps: func(e *expectations, clk *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 1)
			clk.SetTime(epoch.Add(expectationsTimeout))
		},
		wantOK: true,
	}, {
		name: "more creations while waiting do not extend the timeout",
		steps: func(e *expectations, clk *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 1)
			clk.SetTime(epoch.Add(20 * time.Second))
			e.expectCreations(set, 1)
		},
		wantWait: 40 * time.Second,
	}, {
		name: "a new round of creations after the last was seen restarts the timeout",
		steps: func(e *expectations, clk *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 1)
			e.creationObserved(set)
			clk.SetTime(epoch.Add(20 * time.Second))
			e.expectCreations(set, 1)
		},
		wantWait: time.Minute,
	}, {
		name: "extra creation events do not leave credit for the next round",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 1)
			e.creationObserved(set)
			e.creationObserved(set)
			e.expectCreations(set, 1)
		},
		wantWait: time.Minute,
	}, {
		name: "a deleted set forgets what it waited for",
		steps: func(e *expectations, _ *clocktesting.FakePassiveClock) {
			e.expectCreations(set, 5)
			e.forget(set)
		},
		wantOK: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(epoch)
			e := newExpectations(clk)
			tc.steps(e, clk)
			got := e.satisfied(set)
			ok, wait := got.ok, got.wait
			if ok != tc.wantOK || wait != tc.wantWait {
				t.Errorf("satisfied = %v, wait %s; want %v, %s", ok, wait, tc.wantOK, tc.wantWait)
			}
		})
	}
}
