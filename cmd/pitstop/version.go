package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pitstop-dev/pitstop/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print pitstop's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "":
				fmt.Fprintln(cmd.OutOrStdout(), info.String())
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return usageError{fmt.Errorf("invalid value %q for flag --output: must be json or empty", output)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: empty for one line, or json")
	return cmd
}
