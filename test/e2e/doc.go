// Package e2e runs pitstop against the local cluster (internal/localcluster):
// a real control plane with kwok-simulated nodes, where ReplicaSets recreate
// evicted pods, the scheduler places them and the disruption controller
// keeps PodDisruptionBudgets current. The tests are built only with the e2e
// tag: `make e2e` runs them, `make test` and a plain `go test ./...` do not.
package e2e
