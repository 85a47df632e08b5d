package manager

import (
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
)

// cloudEventSources are the clouds --cloud-events may name.
var cloudEventSources = []string{"aws"}

// minCloudEventsInterval keeps polls from hammering the cloud's API.
const minCloudEventsInterval = 10 * time.Second

func (o Options) validateCloudEvents() error {
	for _, name := range o.CloudEvents {
		if !slices.Contains(cloudEventSources, name) {
			return &FlagError{"cloud-events", strings.Join(o.CloudEvents, ","), fmt.Sprintf("unknown cloud %q; known: %s", name, strings.Join(cloudEventSources, ", "))}
		}
	}
	if len(o.CloudEvents) > 1 {
		return &FlagError{"cloud-events", strings.Join(o.CloudEvents, ","), "name one cloud"}
	}
	if o.CloudEventsInterval < minCloudEventsInterval {
		return &FlagError{"cloud-events-interval", o.CloudEventsInterval.String(), "must be at least " + minCloudEventsInterval.String()}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"scheduled-event-retention", o.ScheduledEventRetention}, {"scheduled-event-margin", o.ScheduledEventMargin}, {"scheduled-event-warn-before", o.ScheduledEventWarnBefore}} {
		if d.v < 0 {
			return &FlagError{d.flag, d.v.String(), "must not be negative"}
		}
	}
	return nil
}

// setupCloudEvents starts following the cloud's scheduled events, once
// the API server is known to serve MachineMaintenances. Machines are
// followed when the API server serves them, whoever runs their
// controllers (pitstop's --machine-api, or OpenShift's).
func setupCloudEvents(mgr ctrl.Manager, opts Options, profiles *profile.Reconciler) error {
	gvk := pitstopv1alpha1.GroupVersion.WithKind("MachineMaintenance")
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return fmt.Errorf("the API server does not serve %s; install pitstop's CRDs (kubectl apply -k config/crd): %w", gvk, err)
	}
	machines := true
	mgvk := machinev1beta1.GroupVersion.WithKind("Machine")
	if _, err := mgr.GetRESTMapper().RESTMapping(mgvk.GroupKind(), mgvk.Version); err != nil {
		if !meta.IsNoMatchError(err) {
			return fmt.Errorf("looking up %s: %w", mgvk, err)
		}
		machines = false
	}
	p, err := aws.New(aws.Options{Region: opts.AWSRegion, Endpoint: opts.AWSEndpoint, Secrets: mgr.GetAPIReader()})
	if err != nil {
		return fmt.Errorf("the aws provider: %w", err)
	}
	_, err = machinemaintenance.Setup(mgr, machinemaintenance.Options{
		Cloud: aws.Events{Provider: p}, Namespace: opts.LeaderElectionNamespace, Interval: opts.CloudEventsInterval,
		Machines: machines, Retention: opts.ScheduledEventRetention, Margin: opts.ScheduledEventMargin, WarnBefore: opts.ScheduledEventWarnBefore,
		Outlook: profiles.Decisions, Notify: profiles.NotifyDeadlineAtRisk,
	})
	return err
}
