package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pitstop-dev/pitstop/internal/importer"
)

// stdinName names standard input in errors and notes.
const stdinName = "<stdin>"

func newImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Convert a sapcc/maintenance-controller maintenance.yaml into MaintenanceProfiles",
		Long: `Read the configuration file of sapcc/maintenance-controller (its
maintenance.yaml; "-" reads standard input) and print one MaintenanceProfile
per profile in it, as YAML documents kubectl apply accepts.

${NAME} in a value is replaced with the environment variable NAME, as the
maintenance-controller does. What pitstop cannot express (kubernikusCount,
the hypervisor plugins, an eviction that only cordons, ...) is an error
naming the line; nothing is printed then. Notes on stderr say what was
dropped (notifications, intervals, Lease names) or rewritten (a state's
enter chain runs last in every transition into the state).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("import takes one argument, the file to import (- for standard input), got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.LookupEnv)
		},
	}
}

// smcCompatAdvice tells a maintenance-controller user how to keep its
// state label written for what reads it.
const smcCompatAdvice = "run pitstop with --smc-compat (chart: smcCompat.enabled=true) so that nodes keep the label cloud.sap/maintenance-state that the Cluster API runtime extension and pod affinities read (docs/cluster-api.md)"

// runImport converts the file at path (stdin for "-"), prints the notes on
// stderr and the manifests on stdout. A file with problems prints nothing
// but the error.
func runImport(path string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	name := path
	var data []byte
	var err error
	if path == "-" {
		name = stdinName
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // the path is said once, below
		}
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	r, err := importer.Import(data, importer.Options{File: name, Env: env})
	if err != nil {
		return err
	}
	manifests, err := importer.Render(r.Profiles)
	if err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(stderr, n)
	}
	fmt.Fprintln(stderr, smcCompatAdvice)
	_, err = stdout.Write(manifests)
	return err
}
