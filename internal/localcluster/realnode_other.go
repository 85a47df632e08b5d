//go:build !linux

package localcluster

import "context"

// prepareRealNode is never reached: Start fails first off Linux.
func (c *Cluster) prepareRealNode(context.Context) error { return errNotLinux }

// startRealNode is never reached: Start fails first off Linux.
func (c *Cluster) startRealNode(context.Context) error { return errNotLinux }

// stopRealNode has nothing to stop: no real node runs off Linux.
func (c *Cluster) stopRealNode() error { return nil }

// releaseLeftovers has nothing to release: no real node runs off Linux.
func releaseLeftovers(string) {}
