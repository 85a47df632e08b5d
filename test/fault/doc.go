// Package fault is pitstop's fault-injection campaign: a rolling
// maintenance on a local cluster (internal/localcluster) with two pitstop
// processes under leader election, while parts of the cluster fail — the
// API server stopped, etcd killed, the leader killed or cut off from the
// API server, every request slowed, a manager's clock ahead. A watcher
// records every node and PodDisruptionBudget change and fails the test on
// the first broken invariant; at the end every node must be operational
// and uncordoned, maintained exactly once and told so at most once, with
// no Lease or NodeMaintenance left behind, and the API server's audit log
// must show no pod that pitstop deleted rather than evicted. The campaign
// has three forms (-form): brief, `make fault FAULTFLAGS=-form=brief`;
// short, `make fault FAULTFLAGS=-form=short`; and long, `make fault`. Its
// tests are built only with the fault tag, so `make test` and a plain
// `go test ./...` leave them out.
package fault
