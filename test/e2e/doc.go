// Package e2e runs pitstop against the local cluster (internal/localcluster):
// a real control plane with kwok-simulated nodes, where ReplicaSets recreate
// evicted pods, the scheduler places them and the disruption controller
// keeps PodDisruptionBudgets current. The tests run with `make test`.
package e2e
