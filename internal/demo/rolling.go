//go:build linux

package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// Rolling applies the sample rolling-reboot profile, marks the workers
// reboot-needed a few at a time, and prints the fleet's progress whenever
// it changes, until ctx ends.
func Rolling(ctx context.Context, c client.Client, out io.Writer, batch int, every time.Duration) error {
	data, err := config.Sample("maintenanceprofile.yaml")
	if err != nil {
		return err
	}
	profile := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.UnmarshalStrict(data, profile); err != nil {
		return fmt.Errorf("decoding the sample profile: %w", err)
	}
	// The webhook that judges profiles may still be starting.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Create(ctx, profile.DeepCopy()) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("applying MaintenanceProfile %s: %w", profile.Name, err)
	}
	fmt.Fprintf(out, "Applied MaintenanceProfile %s (config/samples/maintenanceprofile.yaml): workers marked reboot-needed go through maintenance, at most 2 at once.\n", profile.Name)

	go markWorkers(ctx, c, batch, every)
	last := ""
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		line := fleetLine(ctx, c)
		if line != "" && line != last {
			fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
	}
}

// markWorkers annotates the workers reboot-needed, batch at a time.
func markWorkers(ctx context.Context, c client.Client, batch int, every time.Duration) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes, client.HasLabels{localcluster.LabelWorker}); err != nil {
		return
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":"true"}}}`))
	for i := range nodes.Items {
		if i > 0 && i%batch == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
		_ = c.Patch(ctx, &nodes.Items[i], patch)
	}
}

// fleetLine summarises the workers: how many are in each state, and which
// are in maintenance.
func fleetLine(ctx context.Context, c client.Client) string {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes, client.HasLabels{localcluster.LabelWorker}); err != nil {
		return ""
	}
	counts := map[string]int{}
	var inMaintenance []string
	done := 0
	for _, n := range nodes.Items {
		state := n.Labels[pitstopv1alpha1.LabelState]
		if state == "" {
			state = string(pitstopv1alpha1.StateOperational)
		}
		counts[state]++
		if state == string(pitstopv1alpha1.StateInMaintenance) {
			inMaintenance = append(inMaintenance, n.Name)
		}
		rec, err := engine.ReadRecord(&n)
		if err == nil && rec.Profiles["rolling-reboot"].Previous == pitstopv1alpha1.StateInMaintenance {
			done++
		}
	}
	sort.Strings(inMaintenance)
	return fmt.Sprintf("operational %d, maintenance-required %d, in-maintenance %d [%s], rebooted %d of %d",
		counts[string(pitstopv1alpha1.StateOperational)], counts[string(pitstopv1alpha1.StateMaintenanceRequired)],
		counts[string(pitstopv1alpha1.StateInMaintenance)], strings.Join(inMaintenance, " "), done, len(nodes.Items))
}
