// Command pitstop keeps the nodes of a Kubernetes cluster, and the machines
// under them, maintained. This package owns flags and wiring only; the
// behaviour lives under internal/.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the command line and returns the process exit code: 0 on
// success, 1 when the command failed, 2 when the command line was wrong.
// Errors are printed as one line on stderr.
func execute(args []string, stdout, stderr io.Writer) int {
	// The first SIGINT or SIGTERM ends ctx and starts a graceful shutdown; a
	// second one kills the process the usual way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()

	root := newRootCommand(stdout, stderr)
	if isKubectlPlugin(os.Args[0]) {
		// Help and usage then show the command the user typed.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pitstop"}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "pitstop: %v\n", err)
	if isUsageError(err) {
		return 2
	}
	return 1
}

// usageError marks an error in the command line itself: a bad flag value,
// an unknown flag, a missing argument.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func isUsageError(err error) bool {
	_, ok := err.(usageError)
	return ok
}

// pluginName is the file name that makes the binary a kubectl plugin:
// kubectl runs the kubectl-pitstop it finds on the PATH for `kubectl
// pitstop ...`, with the arguments after "pitstop" and its environment.
const pluginName = "kubectl-pitstop"

// isKubectlPlugin reports whether the binary at path runs as kubectl's
// plugin: its file is kubectl-pitstop, or kubectl-pitstop.exe on Windows.
func isKubectlPlugin(path string) bool {
	name := filepath.Base(path)
	if ext := filepath.Ext(name); strings.EqualFold(ext, ".exe") {
		name = strings.TrimSuffix(name, ext)
	}
	return name == pluginName
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "pitstop",
		Short: "Keeps the nodes of a Kubernetes cluster, and the machines under them, maintained",
		// Errors are printed once, on one line, by execute.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCommand(), newDevCommand(), newVersionCommand())
	root.AddCommand(newImportCommand(), newExplainCommand())
	return root
}
