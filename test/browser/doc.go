// Package browser drives pitstop's dashboard in a real headless Chromium
// (Debian's, /usr/bin/chromium; `make deps` installs it) against the local
// cluster (internal/localcluster) and the manager running in the test. It
// checks what a person sees: the pages load, show the right answer, and
// follow the cluster without a reload. The tests run with `make test`; with
// PITSTOP_SCREENSHOTS=DIR they also save the screenshots of docs/images.
package browser
