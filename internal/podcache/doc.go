// Package podcache owns the compact form in which pitstop's informer cache
// keeps the cluster's pods. Every pod of the cluster is cached (the drains
// find a node's pods through it), and a corev1.Pod is about 1.2 kB before
// any of its fields is set, mostly the empty structs of its spec and
// status; on a fleet of 30,000 pods that is most of the manager's memory.
// The cache keeps a Pod instead (about 0.3 kB with what pitstop reads of a
// pod), and every read through the cache's client expands it back into a
// corev1.Pod, so controllers list and get pods as usual.
//
// It does not decide which fields pitstop reads (the manager's cache
// options do) and must not be used for writes: a Pod lacks most of a pod.
package podcache
