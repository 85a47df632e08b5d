// Package bench holds pitstop's benchmarks. They run on the local cluster
// (internal/localcluster), take minutes, and are run by `make bench`, not by
// `make test`; like the local cluster, they run on Linux only (they read
// /proc). Every figure in docs/benchmarks.md comes from here, as a median of
// several runs or a ratio measured side by side in one run, because the
// machines they run on are shared and noisy.
package bench
