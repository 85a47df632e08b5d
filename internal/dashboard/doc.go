// Package dashboard serves pitstop's read-only web view and its JSON API:
// the fleet at a glance (nodes by profile and state, budgets, windows and
// freezes, drains under way) and, per node, the answer of `pitstop explain
// node` as the profile engine last decided it. It reads the manager's
// cache, except Events, which it lists from the API server one node at a
// time. It never writes to the cluster, never decides anything and runs no
// check but the clock's (timeWindow, freeze): the explanations come from
// internal/explain over the profile engine's last decisions. On loopback it
// answers only requests for localhost (LocalHosts), against DNS rebinding.
// Off loopback, Server serves TLS only and internal/access lets in only
// users the API server authenticates for pitstop's audience and allows to
// get AccessPath.
//
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list,namespace=default
package dashboard
