package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/pitstop-dev/pitstop/internal/manager"
)

// TestTheMedik8sLeaseNamespaceFollowsLEASE_NAMESPACE: as the medik8s
// operator does, `pitstop run` takes the namespace of the nodes' medik8s
// Leases from $LEASE_NAMESPACE; --medik8s-lease-namespace overrides it;
// without either it is medik8s-leases.
func TestTheMedik8sLeaseNamespaceFollowsLEASE_NAMESPACE(t *testing.T) {
	parse := func(args ...string) string {
		t.Helper()
		o := manager.DefaultOptions()
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		addManagerFlags(fs, &o)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o.Medik8sLeaseNamespace
	}
	t.Setenv("LEASE_NAMESPACE", "")
	if got := parse(); got != "medik8s-leases" {
		t.Errorf("without LEASE_NAMESPACE: %q, want medik8s-leases", got)
	}
	t.Setenv("LEASE_NAMESPACE", "nhc-leases")
	if got := parse(); got != "nhc-leases" {
		t.Errorf("with LEASE_NAMESPACE=nhc-leases: %q", got)
	}
	if got := parse("--medik8s-lease-namespace=other"); got != "other" {
		t.Errorf("with the flag: %q, want the flag's", got)
	}
}
