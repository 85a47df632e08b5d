// Package faultproxy puts a TCP proxy between a client under test (pitstop's
// manager) and the API server, to inject the network faults a real cluster
// sees: a partition (Blackhole), latency (SetDelay) and connections reset
// mid-request (Reset). It forwards bytes as they are, so TLS passes through
// and the client verifies the API server's own certificate;
// RewriteKubeconfig points a kubeconfig at the proxy. It owns the listener,
// the connections and the goroutines it starts, and leaves none behind after
// Close. It must not look into or change the traffic: a fault is made of
// timing and of closed connections, never of altered bytes. Tests import it.
package faultproxy
