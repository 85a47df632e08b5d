// Command pause is the pause image of a local cluster's real node: the
// process that holds each pod's namespaces while its containers come and go.
// It does nothing but wait for SIGTERM or SIGINT, as Kubernetes' own pause
// does, and ignores its arguments (the image runs it as `/pitstop run`).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
