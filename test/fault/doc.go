// Package fault is pitstop's fault-injection campaign: a rolling
// maintenance on a local cluster (internal/localcluster, with three
// control-plane nodes and the workers) with two pitstop processes under
// leader election, each serving pitstop's validating webhook, while parts
// of the cluster fail or act against pitstop — the API server stopped,
// etcd killed, the leader killed or cut off from the API server, each of
// these in the middle of an eviction too, every request slowed, a
// manager's clock ahead, an administrator's cordons, a co-actor that
// uncordons what pitstop cordons, two budgets racing per zone, a
// control-plane node drained under a partition, and an upgrade from the
// previous build with drains in flight. Workloads behind
// PodDisruptionBudgets that allow exactly one disruption leave the drains
// no slack. A watcher records every node, PodDisruptionBudget and pod
// change and fails the test on the first broken invariant (the budgets,
// per zone where they have one; the PodDisruptionBudgets; an
// administrator's cordon; control-plane quorum); at the end every node
// must be operational and uncordoned (cordoned, if an administrator
// cordoned it), maintained exactly once and told so at most once, with no
// Lease or NodeMaintenance left behind, and the API server's audit log must
// show no pod that pitstop deleted rather than evicted. The campaign has
// four forms (-form): ci, the strikes `make test` runs (`make fault-ci`);
// brief, `make fault FAULTFLAGS=-form=brief`; short, `make fault
// FAULTFLAGS=-form=short`; and long, `make fault`. Its tests are built
// only with the fault tag, so a plain `go test ./...` leaves them out.
package fault
