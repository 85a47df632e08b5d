//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// errDevNotLinux is all `pitstop dev` does off Linux: the local cluster
// relies on Linux to stop its child processes when pitstop dies.
var errDevNotLinux = errors.New("dev runs only on Linux: it starts a local control plane as child processes")

// newDevCommand keeps `pitstop dev` in the help, so that an engineer
// following the README on a laptop learns why it does not run there
// rather than meeting an unknown command.
func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Start a local cluster of simulated nodes and run pitstop against it (Linux only)",
		// Whatever the flags, the answer is the same one line.
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errDevNotLinux
		},
	}
}
