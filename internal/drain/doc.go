// Package drain owns how a node is emptied, and is the only place in pitstop
// that decides it: Plan (pure) sorts the pods on a node into those to evict,
// delete, wait for, leave alone or report as blockers; StaleStatus (pure)
// says when a PodDisruptionBudget's status cannot be trusted to evict on;
// Executor carries out evictions and deletions through the API, within the
// manager-wide bound of a Limiter, and returns what happened; Queue runs an
// Executor apart from the reconcile workers and keeps the answers until the
// drain takes them. The package does not cordon, decide, sleep or retry on
// its own: the NodeMaintenance controller hands the queue its pods on every
// reconcile, takes the answers on the next, and requeues. A Limiter's wait
// for its turn is the one wait.
package drain
