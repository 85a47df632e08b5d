package manager

import (
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pitstop-dev/pitstop/internal/controller/seedfile"
)

// validateSeedConfigFile refuses a --seed-config-file that cannot be read
// or does not import, naming the file's line: pitstop does not start on
// a configuration it would refuse at once.
func (o Options) validateSeedConfigFile() error {
	if o.SeedConfigFile == "" {
		return nil
	}
	if _, err := seedfile.Load(o.SeedConfigFile, o.LeaderElectionNamespace, os.LookupEnv); err != nil {
		return &FlagError{"seed-config-file", o.SeedConfigFile, strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	return nil
}

// setupSeedFile follows the maintenance.yaml at --seed-config-file, with
// its notifications' Secret in pitstop's namespace.
func setupSeedFile(mgr ctrl.Manager, opts Options) error {
	_, err := seedfile.Setup(mgr, seedfile.Options{Path: opts.SeedConfigFile, Namespace: opts.LeaderElectionNamespace})
	return err
}
