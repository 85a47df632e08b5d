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

	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

func newExplainCommand() *cobra.Command {
	var kubeconfig, output string
	cmd := &cobra.Command{
		Use:   "explain (node|profile) NAME",
		Short: "Say why a node is where it is in its maintenance, or how a profile's nodes stand",
		Long: `Read the live cluster and print, for a node, each MaintenanceProfile's
state and since when, every transition of that state with each check's
result and reason, what the drain (NodeMaintenance) is waiting for, recent
events, and when the answer can next change by itself. For a profile: whether
it runs, its nodes per state, and why each node that is not operational
waits, longest first.

The checks are evaluated the way the manager evaluates them, from the
cluster as it is now; nothing is changed. The cluster is the one kubectl
uses: --kubeconfig, else $KUBECONFIG or ~/.kube/config, else the in-cluster
service account.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || (args[0] != "node" && args[0] != "profile") {
				return usageError{fmt.Errorf("explain takes a kind (node or profile) and a name, got %q", args)}
			}
			if output != "text" && output != "json" {
				return usageError{&manager.FlagError{Flag: "output", Value: output, Reason: "must be text or json"}}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cliConfig(kubeconfig)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			ev := profile.NewEvaluator(c, check.Deps{Prometheus: check.NewPrometheusClient()})
			var report interface{ WriteText(io.Writer) error }
			if args[0] == "node" {
				report, err = explain.Node(cmd.Context(), c, c, ev, args[1], time.Now())
			} else {
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
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, or json for scripts")
	return cmd
}

// cliConfig finds the cluster the way kubectl does: --kubeconfig, else
// $KUBECONFIG or ~/.kube/config, else the in-cluster service account.
func cliConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return loadConfig(kubeconfig)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return loadConfig("")
	}
	return withClientDefaults(cfg), nil
}
