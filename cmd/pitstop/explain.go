package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

func newExplainCommand() *cobra.Command {
	var kubeconfig, kubeContext, output string
	cmd := &cobra.Command{
		Use:   "explain (node|profile|machine) NAME",
		Short: "Say why a node is where it is in its maintenance, how a profile's nodes stand, or what is planned for a machine",
		Long: `Read the live cluster and print, for a node, each MaintenanceProfile's
state and since when, every transition of that state with each check's
result and reason, what the drain (NodeMaintenance) is waiting for, recent
events, and when the answer can next change by itself. For a profile: whether
it runs, its nodes per state, and why each node that is not operational
waits, longest first. For a machine (NAMESPACE/NAME): its scheduled cloud
events with the plan for each (MachineMaintenances), then its node's report.

The checks are evaluated the way the manager evaluates them, from the
cluster as it is now (a prometheusInstant check queries Prometheus); nothing
is changed. A prometheusInstant check with credentials (bearerToken,
basicAuth) is the exception: their Secret is read by the manager alone, so
explain reports the check as an error saying so. The dashboard shows the
manager's last evaluation instead, that check's included. The cluster is the one kubectl
uses: --kubeconfig, else $KUBECONFIG or ~/.kube/config, at --context or
the current context, else the in-cluster service account. Installed as
kubectl-pitstop on the PATH, it is also "kubectl pitstop explain".`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || (args[0] != "node" && args[0] != "profile" && args[0] != "machine") {
				return usageError{fmt.Errorf("explain takes a kind (node, profile or machine) and a name, got %q", args)}
			}
			if output != "text" && output != "json" {
				return usageError{&manager.FlagError{Flag: "output", Value: output, Reason: "must be text or json"}}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cliConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			// No Secrets: explain runs with its user's access, and pitstop's
			// Secrets are for the manager to send, not to be read onto the
			// machine explain runs on.
			ev := fleet.NewEvaluator(c, check.Deps{Prometheus: check.NewPrometheusClient()})
			var report interface{ WriteText(io.Writer) error }
			switch args[0] {
			case "node":
				report, err = explain.Node(cmd.Context(), c, c, ev, args[1], time.Now())
			case "machine":
				report, err = explain.Machine(cmd.Context(), c, c, ev, args[1], time.Now())
			default:
				report, err = explain.Profile(cmd.Context(), c, ev, args[1], time.Now())
			}
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			return report.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "the kubeconfig context to use (default: its current context)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, or json for scripts")
	return cmd
}

// cliConfig finds the cluster the way kubectl does: the kubeconfig of
// --kubeconfig, else $KUBECONFIG or ~/.kube/config, at the context of
// --context, else the kubeconfig's current one; without a kubeconfig, the
// in-cluster service account. kubectl hands a plugin its environment and
// the arguments after the plugin's name, so `kubectl pitstop explain ...
// --context x` reaches the cluster `kubectl get ... --context x` does.
func cliConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	if kubeContext == "" && kubeconfig != "" {
		return loadConfig(kubeconfig) // its errors name the flag and the file
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, then ~/.kube/config
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := loader.ClientConfig()
	switch {
	case err == nil:
		return withClientDefaults(cfg), nil
	case kubeContext != "":
		return nil, contextError(loader, kubeContext, err)
	}
	return loadConfig("") // the in-cluster service account, or an error saying where pitstop looked
}

// contextError explains why the kubeconfig at --context gave no
// configuration: a usage error when the context does not exist.
func contextError(loader clientcmd.ClientConfig, kubeContext string, err error) error {
	raw, rawErr := loader.RawConfig()
	if rawErr != nil {
		return fmt.Errorf("loading the kubeconfig: %w", rawErr)
	}
	if _, ok := raw.Contexts[kubeContext]; !ok {
		return usageError{&manager.FlagError{Flag: "context", Value: kubeContext, Reason: "no such context in the kubeconfig"}}
	}
	return fmt.Errorf("loading context %s of the kubeconfig: %w", kubeContext, err)
}
