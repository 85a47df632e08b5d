// Package dashboard serves pitstop's read-only web view and its JSON API:
// the fleet at a glance (nodes by profile and state, budgets, windows and
// freezes, drains under way) and, per node, the same answer as `pitstop
// explain node`. It reads the manager's cache, except Events, which it
// lists from the API server one node at a time. It never writes to the
// cluster and never decides anything: the explanations come from
// internal/explain and the profile controller's Evaluator.
//
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list,namespace=default
package dashboard
