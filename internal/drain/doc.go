// Package drain owns how a node is emptied, and is the only place in pitstop
// that decides it: Plan (pure) sorts the pods on a node into those to evict,
// delete, wait for, leave alone or report as blockers, and Executor carries
// out evictions and deletions through the API and returns what happened.
// The package does not cordon, keep state between calls, sleep or retry on
// its own: the NodeMaintenance controller calls it on every reconcile and
// requeues.
package drain
