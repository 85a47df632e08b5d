// Package kwoknode builds the Node objects that kwok plays the kubelet for:
// labels, capacity, addresses and the annotation that tells kwok to take the
// node on. The local cluster makes its nodes with it, and so does the kwok
// machine provider, which ships in the pitstop binary. It only builds
// objects: it must not talk to an API server or start processes, so that it
// builds on every platform pitstop does, unlike the Linux-only local
// cluster.
package kwoknode
