// Package testutil is shared by pitstop's test suites: a real API server and
// etcd from bin/ (envtest) with pitstop's CRDs installed, builders for the
// objects tests create, and polling helpers. It is imported by tests only.
package testutil
