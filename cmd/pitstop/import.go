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
	var opts importer.Options
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Convert a sapcc/maintenance-controller maintenance.yaml into MaintenanceProfiles",
		Long: `Read the configuration file of sapcc/maintenance-controller (its
maintenance.yaml; "-" reads standard input) and print one MaintenanceProfile
per profile in it, as YAML documents kubectl apply accepts.

Notifications are imported too: what the file holds in clear (Slack
webhook URLs and tokens, mail passwords) goes into a Secret printed before
the profiles (--secret-name in --secret-namespace, pitstop's namespace,
labelled pitstop.dev/usable-by-profiles=true), so that one kubectl apply
brings everything over. With --existing-secret the Secret is not printed:
the notifications refer to the keys <notification>.hook, .token or
.password of an existing one.

${NAME} in a value is replaced with the environment variable NAME, as the
maintenance-controller does. What pitstop cannot express is an error
naming the line; nothing is printed then. Notes on stderr say what was
dropped (intervals, Lease names) or rewritten (an eviction becomes a
cordon, drain or restore trigger; reboot-ok becomes reboot_ok); warnings
say what pitstop will do differently (docs/migrating-from-maintenance-controller.md).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("import takes one argument, the file to import (- for standard input), got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Env = os.LookupEnv
			return runImport(args[0], opts, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.SecretName, "secret-name", importer.DefaultSecretName, "the Secret holding the notifications' webhook URLs, tokens and passwords")
	fs.StringVar(&opts.SecretNamespace, "secret-namespace", importer.DefaultSecretNamespace, "the Secret's namespace: the one pitstop runs in")
	fs.BoolVar(&opts.ExistingSecret, "existing-secret", false, "do not print the Secret: --secret-name exists already, with the keys <notification>.hook, .token or .password")
	return cmd
}

// smcCompatAdvice tells a maintenance-controller user how to keep its
// state label written for what reads it.
const smcCompatAdvice = "note: run pitstop with --smc-compat (chart: smcCompat.enabled=true) so that nodes keep the label cloud.sap/maintenance-state that the Cluster API runtime extension and pod affinities read (docs/cluster-api.md)"

// runImport converts the file at path (stdin for "-"), prints the notes on
// stderr and the manifests on stdout. A file with problems prints nothing
// but the error.
func runImport(path string, opts importer.Options, stdin io.Reader, stdout, stderr io.Writer) error {
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
	opts.File = name
	r, err := importer.Import(data, opts)
	if err != nil {
		return err
	}
	manifests, err := importer.RenderResult(r)
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
