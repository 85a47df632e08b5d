package medik8s

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestLeaseErrors(t *testing.T) {
	held := fmt.Errorf("taking it: %w", &heldError{namespace: LeaseNamespace, node: "n1", holder: "node-healthcheck"})
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "node-n1", errors.New("changed"))
	for name, tc := range map[string]struct {
		count   int64
		err     error
		started bool
		want    int64
	}{
		"resets the count once the Lease is held":                             {count: 3, want: 0},
		"does not count waiting for another holder before the start":          {count: 0, err: held, want: 0},
		"counts another holder once the maintenance has started (Lease lost)": {count: 2, err: held, started: true, want: 3},
		"counts any other error":                                              {count: 1, err: errors.New("connection refused"), want: 2},
		"does not count a conflict, which is a look again":                    {count: 1, err: conflict, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := leaseErrors(tc.count, tc.err, tc.started); got != tc.want {
				t.Errorf("leaseErrors(%d, %v, started %v) = %d, want %d", tc.count, tc.err, tc.started, got, tc.want)
			}
		})
	}
}
