package manager

import (
	"net"
	"testing"
)

// TestTheDashboardListensOnLoopbackByDefault: unless told otherwise, the
// dashboard is reached only from the pod itself (kubectl port-forward) or
// the machine pitstop runs on.
func TestTheDashboardListensOnLoopbackByDefault(t *testing.T) {
	addr := DefaultOptions().DashboardAddr
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("the dashboard listens on %q by default, want a loopback address", addr)
	}
}
