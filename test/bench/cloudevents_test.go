package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var (
	cloudMachines = flag.Int("cloud-machines", 100, "how many Machines BenchmarkCloudEventsNotice schedules events for")
	cloudAccount  = flag.Int("cloud-account", 1000, "how many instances the EC2 account of BenchmarkCloudEventsNotice holds in all (the cluster's among them)")
	cloudRuns     = flag.Int("cloud-runs", 5, "how many times BenchmarkCloudEventsNotice notices the events; the median is reported")
)

// BenchmarkCloudEventsNotice measures how pitstop notices the scheduled
// events of -cloud-machines Machines, each with one event, in an EC2
// account of -cloud-account instances (the local EC2 endpoint, which
// speaks EC2's wire format), against a real API server: the
// DescribeInstanceStatus pages one poll asks for, the poll's time, and
// the time from the poll's start until every MachineMaintenance exists
// with its latest safe start and every node carries its event. Side by
// side, in the same run, the same events read one instance at a time, as
// a poller that describes each instance would. Each run deletes the
// objects and takes the events off the nodes first. Reports the medians.
func BenchmarkCloudEventsNotice(b *testing.B) {
	n, account := *cloudMachines, *cloudAccount
	if n < 1 || account < n || *cloudRuns < 1 {
		b.Fatalf("-cloud-machines (%d) must be at least 1 and at most -cloud-account (%d); -cloud-runs (%d) at least 1", n, account, *cloudRuns)
	}
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	env, err := testutil.StartEnv()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	ctx := b.Context()
	const ns, key, secret = "cloud", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testutil.Namespace(b, env.Client, ns)
	testutil.Create(b, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"aws_access_key_id": key, "aws_secret_access_key": secret}})
	f := ec2sim.Start()
	b.Cleanup(f.Close)
	f.AddCredentials(key, secret)
	spec, _ := json.Marshal(map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": aws.Kind,
		"placement": map[string]string{"region": "us-east-1", "availabilityZone": "us-east-1a"}, "credentialsSecret": map[string]string{"name": "creds"}})
	notBefore := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	var ids []string
	for i := range account {
		id := f.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
		f.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: fmt.Sprintf("instance-event-%05d", i), Code: "instance-retirement", NotBefore: notBefore})
		if i >= n {
			continue
		}
		ids = append(ids, id)
		name := fmt.Sprintf("worker-%04d", i)
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: machinev1beta1.MachineSpec{ProviderID: ptr.To("aws:///us-east-1a/" + id), ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: spec}}}}
		node := testutil.Node("cloud-" + name)
		node.Spec.ProviderID = "aws:///us-east-1a/" + id
		testutil.Create(b, env.Client, m, node)
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: node.Name}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	p, err := aws.New(aws.Options{Region: "us-east-1", Endpoint: f.URL, Secrets: env.Client})
	if err != nil {
		b.Fatal(err)
	}
	var poller *machinemaintenance.Poller
	testutil.StartControllers(b, env.Config, ctrl.Options{}, func(mgr ctrl.Manager) error {
		var err error
		poller, err = machinemaintenance.Setup(mgr, machinemaintenance.Options{Cloud: aws.Events{Provider: p}, Namespace: ns, Interval: 24 * time.Hour, Machines: true})
		return err
	})
	perInstance := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(f.URL), Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")})

	var targets []cloud.Target
	for _, id := range ids {
		targets = append(targets, cloud.Target{InstanceID: id, Region: "us-east-1", Namespace: ns, CredentialsSecret: "creds"})
	}
	// The poll pitstop makes at start is not counted: the runs begin once
	// it is done.
	awaitNoticed(b, env.Client, ns, n)
	var pollTimes, noticed, listed, oneByOne []time.Duration
	var pages int
	for range b.N {
		for run := range *cloudRuns {
			clearEvents(b, env.Client, ns, n)
			start := time.Now()
			sum, err := poller.Poll(ctx)
			if err != nil {
				b.Fatalf("run %d: %v", run+1, err)
			}
			pollTimes = append(pollTimes, time.Since(start))
			pages = sum.Calls
			if sum.Targets != n || sum.Events != n {
				b.Fatalf("run %d: poll saw %d instances and %d events; want %d each", run+1, sum.Targets, sum.Events, n)
			}
			awaitNoticed(b, env.Client, ns, n)
			noticed = append(noticed, time.Since(start))

			start = time.Now()
			if res := p.ScheduledEventsOf(ctx, targets); len(res.Events) != n || len(res.Failed) != 0 {
				b.Fatalf("listing: %d events, %d failed", len(res.Events), len(res.Failed))
			}
			listed = append(listed, time.Since(start))
			start = time.Now()
			for _, id := range ids {
				out, err := perInstance.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}, IncludeAllInstances: awssdk.Bool(true)})
				if err != nil || len(out.InstanceStatuses) != 1 || len(out.InstanceStatuses[0].Events) != 1 {
					b.Fatalf("describing %s alone: %v", id, err)
				}
			}
			oneByOne = append(oneByOne, time.Since(start))
		}
	}
	poll, all, list, each := median(pollTimes), median(noticed), median(listed), median(oneByOne)
	b.ReportMetric(float64(pages), "pages/poll")
	b.ReportMetric(poll.Seconds(), "poll-s")
	b.ReportMetric(all.Seconds(), "noticed-s")
	b.ReportMetric(list.Seconds(), "ec2-listing-s")
	b.ReportMetric(each.Seconds(), "ec2-one-by-one-s")
	b.Logf("%d Machines' events in an account of %d instances (medians of %d): one poll asks EC2 for %d DescribeInstanceStatus page(s) and takes %.3fs, writing the %d MachineMaintenances; every object planned and every node signalled %.3fs after the poll began. EC2's side alone: the paged listing %.4fs; one call per instance, as a per-instance poller would, %d calls in %.4fs (listing/one-by-one %.2f; against a local endpoint with no network latency, where each real call costs a round trip and a share of the account's request rate)",
		n, account, len(pollTimes), pages, poll.Seconds(), n, all.Seconds(), list.Seconds(), n, each.Seconds(), list.Seconds()/each.Seconds())
}

// clearEvents deletes the MachineMaintenances and waits until the nodes
// no longer carry an event.
func clearEvents(b *testing.B, c client.Client, ns string, n int) {
	b.Helper()
	if err := c.DeleteAllOf(b.Context(), &pitstopv1alpha1.MachineMaintenance{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	testutil.Eventually(b, 2*time.Minute, 100*time.Millisecond, func() error {
		list := &corev1.NodeList{}
		if err := c.List(b.Context(), list, client.HasLabels{pitstopv1alpha1.LabelScheduledEvent}); err != nil {
			return err
		}
		mms := &pitstopv1alpha1.MachineMaintenanceList{}
		if err := c.List(b.Context(), mms, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items)+len(mms.Items) > 0 {
			return fmt.Errorf("%d nodes still carry an event, %d objects left", len(list.Items), len(mms.Items))
		}
		return nil
	})
}

// awaitNoticed waits until n MachineMaintenances have their latest safe
// start and n nodes carry their event.
func awaitNoticed(b *testing.B, c client.Client, ns string, n int) {
	b.Helper()
	testutil.Eventually(b, 2*time.Minute, 20*time.Millisecond, func() error {
		mms := &pitstopv1alpha1.MachineMaintenanceList{}
		if err := c.List(context.Background(), mms, client.InNamespace(ns)); err != nil {
			return err
		}
		planned := 0
		for _, mm := range mms.Items {
			if mm.Status.LatestSafeStart != nil {
				planned++
			}
		}
		nodes := &corev1.NodeList{}
		if err := c.List(context.Background(), nodes, client.HasLabels{pitstopv1alpha1.LabelScheduledEvent}); err != nil {
			return err
		}
		if planned != n || len(nodes.Items) != n {
			return fmt.Errorf("%d of %d objects planned, %d nodes signalled", planned, n, len(nodes.Items))
		}
		return nil
	})
}
