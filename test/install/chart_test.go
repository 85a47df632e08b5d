package install

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestChartLintsAndRendersOverAMatrixOfValues lints the chart strictly and
// renders it with each feature on and off: every combination renders
// objects that decode, and what each value turns on is there.
func TestChartLintsAndRendersOverAMatrixOfValues(t *testing.T) {
	if out, err := testutil.Helm(t, "lint", "--strict", repoPath(t, "charts", "pitstop")); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	everything := []string{"machineAPI.enabled=true", "machineAPI.installCRDs=true", "machineAPI.providers={aws,kwok}",
		"medik8sCompat.enabled=true", "cloudEvents.enabled=true", "clusterAPI.enabled=true", "clusterAPI.metal3=true", "clusterAPI.namespaces={capi-a,capi-b}", "kvm.alterHypervisor=true", "smcCompat.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
		"grafanaDashboard.enabled=true", "namespace.create=true", "seedConfig.enabled=true", "seedConfig.configMap=maintenance"}
	for _, tc := range []struct {
		name  string
		set   []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{"the defaults run two replicas on two nodes, with the webhook and no optional feature", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			if *d.Spec.Replicas != 2 {
				t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
			}
			if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Errorf("the replicas may share a node: affinity %+v", a)
			}
			assertArgs(t, d, []string{"--webhook-service=pitstop-system/pitstop-webhook", "--webhook-manage-certificate=true"}, []string{"--machine-api", "--medik8s-compat", "--prometheus-url-allow", "--seed-config-file"})
			if find(objs, "ValidatingWebhookConfiguration", "", "pitstop-validating-webhook") == nil {
				t.Error("no webhook configuration")
			}
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap", "Namespace", "Certificate"} {
				if len(ofKind(objs, kind)) != 0 {
					t.Errorf("a %s without its value", kind)
				}
			}
			// pitstop-view aggregates into the built-in roles; pitstop-edit,
			// which writes profiles, is bound by administrators.
			for role, aggregates := range map[string][]string{"pitstop-view": {"view", "edit", "admin"}, "pitstop-edit": nil} {
				r := find(objs, "ClusterRole", "", role)
				if r == nil {
					t.Errorf("no ClusterRole %s", role)
					continue
				}
				for _, to := range []string{"view", "edit", "admin"} {
					if got, want := r.GetLabels()["rbac.authorization.k8s.io/aggregate-to-"+to] == "true", slices.Contains(aggregates, to); got != want {
						t.Errorf("ClusterRole %s aggregates to %s: %v, want %v", role, to, got, want)
					}
				}
			}
			// The dashboard listens on loopback, for kubectl port-forward:
			// nothing leads to it from the pod network.
			assertArgs(t, d, []string{"--dashboard-addr=127.0.0.1:8082", "--metrics-bind-address=:8080"}, nil)
			if s := find(objs, "Service", namespace, "pitstop-dashboard"); s != nil {
				t.Error("a Service leads to the dashboard, which listens on loopback")
			}
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				if p.Name == "dashboard" {
					t.Errorf("the container declares the dashboard's port %d, which listens on loopback", p.ContainerPort)
				}
			}
			assertAccessRoles(t, objs, nil)
		}},
		{"a lone control-plane node may be maintained, and pitstop tolerates the cordon", []string{"controlPlane.allowSingleNodeMaintenance=true", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--allow-single-control-plane-maintenance"}, nil)
			var keys []string
			for _, tol := range d.Spec.Template.Spec.Tolerations {
				keys = append(keys, tol.Key)
			}
			if want := []string{"dedicated", "node.kubernetes.io/unschedulable", "pitstop.dev/drain"}; !slices.Equal(keys, want) {
				t.Errorf("tolerations %v, want %v: the drain of the only node would evict pitstop itself", keys, want)
			}
			if !drain.ToleratesCordon(&corev1.Pod{Spec: d.Spec.Template.Spec}) {
				t.Error("pitstop's pod does not tolerate the cordon: the drain would evict it")
			}
		}},
		{"an exposed dashboard listens on the pod's network behind its Service", []string{"dashboard.expose=true", "dashboard.service.type=LoadBalancer"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			assertArgs(t, deployment(t, objs), []string{"--dashboard-addr=:8082"}, nil)
			if s := find(objs, "Service", namespace, "pitstop-dashboard"); s == nil || s.Object["spec"].(map[string]any)["type"] != "LoadBalancer" {
				t.Errorf("the dashboard's Service is not the LoadBalancer asked for: %v", s)
			}
			np := find(objs, "NetworkPolicy", namespace, "pitstop")
			if np == nil || !strings.Contains(fmt.Sprint(np.Object["spec"]), "port:dashboard") {
				t.Errorf("the NetworkPolicy does not let the dashboard be reached: %v", np)
			}
		}},
		{"viewers and readers are bound to the access roles, Prometheus sends its token", []string{
			"metrics.serviceMonitor.enabled=true",
			"dashboard.viewers[0].kind=Group", "dashboard.viewers[0].name=sre",
			"metrics.readers[0].kind=ServiceAccount", "metrics.readers[0].name=prometheus", "metrics.readers[0].namespace=monitoring",
		}, func(t *testing.T, objs []*unstructured.Unstructured) {
			assertAccessRoles(t, objs, map[string]string{"pitstop-dashboard-viewer": "Group/sre", "pitstop-metrics-reader": "ServiceAccount/monitoring/prometheus"})
			sm := find(objs, "ServiceMonitor", namespace, "pitstop")
			if sm == nil {
				t.Fatal("no ServiceMonitor")
			}
			endpoint := sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			if endpoint["bearerTokenFile"] != "/var/run/secrets/pitstop/token" {
				t.Errorf("the ServiceMonitor sends no bearer token for audience pitstop: %v", endpoint)
			}
		}},
		{"the ServiceMonitor sends the token of a Secret", []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.bearerTokenSecret.name=scraper", "metrics.serviceMonitor.bearerTokenSecret.key=token"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			endpoint := find(objs, "ServiceMonitor", namespace, "pitstop").Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scraper", "key": "token"}}
			if !equality.Semantic.DeepEqual(endpoint["authorization"], want) || endpoint["bearerTokenFile"] != nil {
				t.Errorf("the ServiceMonitor's endpoint %v, want the authorization %v alone", endpoint, want)
			}
		}},
		{"every feature on", everything, func(t *testing.T, objs []*unstructured.Unstructured) {
			assertArgs(t, deployment(t, objs), []string{"--machine-api", "--machine-providers=aws,kwok", "--medik8s-compat",
				"--cloud-events=aws", "--cloud-events-interval=5m", "--scheduled-event-retention=168h", "--smc-compat", "--cluster-api", "--metal3", "--cluster-api-namespaces=capi-a,capi-b",
				"--seed-config-file=/etc/pitstop/seed/maintenance.yaml"}, nil)
			for _, name := range []string{"pitstop-core", "pitstop-machine-api", "pitstop-kwok-provider", "pitstop-medik8s", "pitstop-cloud-events", "pitstop-core-alter-hypervisors", "pitstop-seed-file"} {
				if find(objs, "ClusterRoleBinding", "", name) == nil {
					t.Errorf("no ClusterRoleBinding %s", name)
				}
			}
			// The Cluster API bridge's grants hold in the namespaces listed.
			for _, ns := range []string{"capi-a", "capi-b"} {
				if find(objs, "RoleBinding", ns, "pitstop-cluster-api-namespaced") == nil {
					t.Errorf("no RoleBinding pitstop-cluster-api-namespaced in %s", ns)
				}
			}
			for _, name := range []string{"pitstop-cluster-api", "pitstop-cluster-api-namespaced"} {
				if find(objs, "ClusterRoleBinding", "", name) != nil {
					t.Errorf("ClusterRoleBinding %s: the Cluster API bridge is granted its Secrets and hosts in every namespace", name)
				}
			}
			if find(objs, "RoleBinding", "openshift-machine-api", "pitstop-cloud-events-machines") == nil {
				t.Error("the cloud events' Machine writes are not bound in the Machines' namespace")
			}
			if find(objs, "RoleBinding", "openshift-machine-api", "pitstop-aws-provider") == nil {
				t.Error("the aws provider's Secrets role is not bound in the Machines' namespace")
			}
			if find(objs, "ClusterRoleBinding", "", "pitstop-aws-provider") != nil {
				t.Error("the aws provider may read Secrets in every namespace")
			}
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
				if len(ofKind(objs, kind)) != 1 {
					t.Errorf("%d %s, want 1", len(ofKind(objs, kind)), kind)
				}
			}
			// The release's namespace, and medik8s' Lease namespace, kept
			// on uninstall (other medik8s components use it).
			if n := len(ofKind(objs, "Namespace")); n != 2 {
				t.Errorf("%d Namespaces, want 2", n)
			}
			if ns := find(objs, "Namespace", "", "medik8s-leases"); ns == nil || ns.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("Namespace medik8s-leases %v, want one kept on uninstall", ns)
			}
			if find(objs, "RoleBinding", "medik8s-leases", "pitstop-medik8s") == nil {
				t.Error("no RoleBinding for the medik8s Leases")
			}
			if n := len(ofKind(objs, "CustomResourceDefinition")); n != 8 {
				t.Errorf("%d CRDs, want pitstop's 3, the Machine API's 3 and medik8s' NodeMaintenance of both APIs", n)
			}
			for _, name := range []string{"nodemaintenances.nodemaintenance.medik8s.io", "nodemaintenances.kubevirt.io", "machines.machine.openshift.io", "machinesets.machine.openshift.io", "machinehealthchecks.machine.openshift.io"} {
				if crd := find(objs, "CustomResourceDefinition", "", name); crd == nil || crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
					t.Errorf("CRD %s %v, want one kept on uninstall (deleting a CRD deletes its objects)", name, crd)
				}
			}
			cm := ofKind(objs, "ConfigMap")[0]
			var dashboard map[string]any
			if err := json.Unmarshal([]byte(cm.Object["data"].(map[string]any)["pitstop.json"].(string)), &dashboard); err != nil {
				t.Errorf("the Grafana dashboard is not JSON: %v", err)
			}
		}},
		{"no optional feature binds only the core roles", []string{"webhook.enabled=false", "metrics.enabled=false", "dashboard.enabled=false", "networkPolicy.enabled=false", "podDisruptionBudget.enabled=false"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			assertArgs(t, deployment(t, objs), []string{"--webhook-port=0", "--metrics-bind-address=0", "--dashboard-addr=0"}, nil)
			for _, b := range ofKind(objs, "ClusterRoleBinding") {
				if b.GetName() != "pitstop-core" {
					t.Errorf("ClusterRoleBinding %s without its feature", b.GetName())
				}
			}
			for _, kind := range []string{"ValidatingWebhookConfiguration", "NetworkPolicy", "PodDisruptionBudget", "Secret"} {
				if len(ofKind(objs, kind)) != 0 {
					t.Errorf("a %s though it is off", kind)
				}
			}
			for _, role := range []string{"pitstop-dashboard-viewer", "pitstop-metrics-reader"} {
				if find(objs, "ClusterRole", "", role) != nil {
					t.Errorf("ClusterRole %s though what it grants is off", role)
				}
			}
		}},
		{"cert-manager issues the webhook's certificate", []string{"webhook.certManager.enabled=true"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			assertArgs(t, deployment(t, objs), []string{"--webhook-manage-certificate=false"}, nil)
			vwc := find(objs, "ValidatingWebhookConfiguration", "", "pitstop-validating-webhook")
			if vwc == nil || vwc.GetAnnotations()["cert-manager.io/inject-ca-from"] != namespace+"/pitstop-webhook" {
				t.Errorf("the webhook configuration does not ask cert-manager for its CA: %v", vwc)
			}
			if len(ofKind(objs, "Certificate")) != 1 || len(ofKind(objs, "Issuer")) != 1 {
				t.Error("no Certificate and Issuer")
			}
		}},
		{"one replica spreads where it can", []string{"replicas=1", "podAntiAffinity=preferred"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			a := deployment(t, objs).Spec.Template.Spec.Affinity
			if a == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
				t.Errorf("affinity %+v", a)
			}
		}},
		{"prometheusURLAllow keeps prometheusInstant checks to the Prometheus servers listed", []string{"prometheusURLAllow={https://prometheus.monitoring.svc:9090/,http://thanos.monitoring.svc:10902/}"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			want := []string{"--prometheus-url-allow=https://prometheus.monitoring.svc:9090/", "--prometheus-url-allow=http://thanos.monitoring.svc:10902/"}
			assertArgs(t, d, want, nil)
			// The manager reads them as the two prefixes.
			opts := manager.DefaultOptions()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.StringSliceVar(&opts.PrometheusURLAllow, "prometheus-url-allow", nil, "")
			if err := fs.Parse(want); err != nil {
				t.Fatal(err)
			}
			if err := opts.Validate(); err != nil || len(opts.PrometheusURLAllow) != 2 {
				t.Errorf("the manager reads the chart's flags as %v: %v", opts.PrometheusURLAllow, err)
			}
		}},
		{"notifyHostAllow lets mail notifications log in to the servers listed", []string{"notifyHostAllow={smtp.example.com:587,10.0.0.25}"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			want := []string{"--notify-host-allow=smtp.example.com:587", "--notify-host-allow=10.0.0.25"}
			assertArgs(t, deployment(t, objs), want, nil)
			opts := manager.DefaultOptions()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.StringSliceVar(&opts.NotifyHostAllow, "notify-host-allow", nil, "")
			if err := fs.Parse(want); err != nil {
				t.Fatal(err)
			}
			if err := opts.Validate(); err != nil || len(opts.NotifyHostAllow) != 2 {
				t.Errorf("the manager reads the chart's flags as %v: %v", opts.NotifyHostAllow, err)
			}
		}},
		{"an image digest wins over the tag", []string{"image.digest=sha256:" + strings.Repeat("a", 64), "image.tag=v9"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := deployment(t, objs).Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/pitstop-dev/pitstop@sha256:"+strings.Repeat("a", 64) {
				t.Errorf("image %s", got)
			}
		}},
		{"esx mounts its Secret's esx.yaml read-only and points --esx-config at it", []string{"esx.enabled=true", "esx.secretName=vcenters"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--esx", "--esx-config=/etc/pitstop/esx/esx.yaml"}, nil)
			assertSecretMount(t, d, "esx-config", "/etc/pitstop/esx", "vcenters")
		}},
		{"kubernikus mounts its Secret and points its flags at it", []string{"kubernikus.enabled=true", "kubernikus.secretName=cloud-config"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--kubernikus", "--kubernikus-config=/etc/pitstop/kubernikus/kubernikus.yaml", "--openstack-cloud-config=/etc/pitstop/kubernikus/cloudprovider.conf"}, nil)
			assertSecretMount(t, d, "kubernikus-config", "/etc/pitstop/kubernikus", "cloud-config")
		}},
		{"a kubernikus Secret alone serves kubernikusCount checks", []string{"kubernikus.secretName=cloud-config"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--openstack-cloud-config=/etc/pitstop/kubernikus/cloudprovider.conf"}, []string{"--kubernikus"})
			assertSecretMount(t, d, "kubernikus-config", "/etc/pitstop/kubernikus", "cloud-config")
		}},
		{"seedConfig mounts its ConfigMap whole and read-only, points --seed-config-file at it and grants the seed file's roles", []string{"seedConfig.enabled=true", "seedConfig.configMap=maintenance-config"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--seed-config-file=/etc/pitstop/seed/maintenance.yaml"}, nil)
			assertSeedMount(t, d)
			var fromConfigMap bool
			for _, v := range d.Spec.Template.Spec.Volumes {
				fromConfigMap = fromConfigMap || (v.Name == "seed-config" && v.ConfigMap != nil && v.ConfigMap.Name == "maintenance-config" && len(v.ConfigMap.Items) == 0)
			}
			if !fromConfigMap {
				t.Errorf("seed-config is not the ConfigMap maintenance-config: %+v", d.Spec.Template.Spec.Volumes)
			}
			if find(objs, "ClusterRoleBinding", "", "pitstop-seed-file") == nil || find(objs, "RoleBinding", namespace, "pitstop-seed-file") == nil {
				t.Error("the seed file's roles are not bound")
			}
			// The manager reads the chart's flag.
			opts := manager.DefaultOptions()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.StringVar(&opts.SeedConfigFile, "seed-config-file", "", "")
			if err := fs.Parse([]string{"--seed-config-file=/etc/pitstop/seed/maintenance.yaml"}); err != nil || opts.SeedConfigFile != "/etc/pitstop/seed/maintenance.yaml" {
				t.Errorf("the manager reads the chart's flag as %q: %v", opts.SeedConfigFile, err)
			}
		}},
		{"seedConfig mounts a Secret instead", []string{"seedConfig.enabled=true", "seedConfig.secret=maintenance"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			d := deployment(t, objs)
			assertArgs(t, d, []string{"--seed-config-file=/etc/pitstop/seed/maintenance.yaml"}, nil)
			assertSeedMount(t, d)
			assertSecretMount(t, d, "seed-config", "/etc/pitstop/seed", "maintenance")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, testutil.RenderChart(t, tc.set...)) })
	}
}

// assertSeedMount checks that the seed file's volume is mounted read-only
// at /etc/pitstop/seed as a whole: the kubelet never updates a subPath
// mount, and pitstop follows the file's edits.
func assertSeedMount(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "seed-config" && m.MountPath == "/etc/pitstop/seed" && m.ReadOnly && m.SubPath == "" {
			return
		}
	}
	t.Errorf("seed-config is not mounted whole and read-only at /etc/pitstop/seed: %+v", d.Spec.Template.Spec.Containers[0].VolumeMounts)
}

// assertSecretMount checks that volume name mounts Secret secret read-only
// at path.
func assertSecretMount(t *testing.T, d *appsv1.Deployment, name, path, secret string) {
	t.Helper()
	var mounted, fromSecret bool
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == name && m.MountPath == path && m.ReadOnly)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		fromSecret = fromSecret || (v.Name == name && v.Secret != nil && v.Secret.SecretName == secret)
	}
	if !mounted || !fromSecret {
		t.Errorf("%s not mounted read-only at %s from Secret %s: mounts %+v, volumes %+v", name, path, secret, d.Spec.Template.Spec.Containers[0].VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
}

// TestChartRefusesWrongValuesNamingThem checks that values.schema.json
// makes helm refuse a wrong value with a message that names it.
func TestChartRefusesWrongValuesNamingThem(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"replicas=two", "/replicas"},
		{"webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"},
		{"machineAPI.providers={gce}", "/machineAPI/providers/0"},
		{"podAntiAffinity=always", "/podAntiAffinity"},
		{"dashbord.enabled=false", "dashbord"},
		{"dashboard.expose=yes", "/dashboard/expose"},
		{"metrics.readers[0].kind=ServiceAccount,metrics.readers[0].name=prometheus", "/metrics/readers/0"},
		{"leaderElection.leaseDuration=15 seconds", "/leaderElection/leaseDuration"},
		{"image.digest=latest", "/image/digest"},
		{"esx.enabled=true", "esx.secretName"},
		{"kubernikus.enabled=true", "kubernikus.secretName"},
		{"seedConfig.enabled=true", "seedConfig.configMap"},
		{"seedConfig.enabled=true,seedConfig.configMap=a,seedConfig.secret=b", "not both"},
		{"seedConfig.configMap=Maintenance_Config", "/seedConfig/configMap"},
		{"prometheusURLAllow={prometheus.monitoring.svc:9090}", "/prometheusURLAllow/0"},
		{"notifyHostAllow={smtp://mail.example.com}", "/notifyHostAllow/0"},
		{"clusterAPI.enabled=true", "clusterAPI.namespaces"},
		{"clusterAPI.namespaces={Not_A_Namespace}", "/clusterAPI/namespaces/0"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := testutil.Helm(t, "template", "pitstop", repoPath(t, "charts", "pitstop"), "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: got %v, want a refusal naming %s", tc.set, err, tc.want)
			}
		})
	}
}

// TestReleaseFileIsTheChartRendered writes pitstop.yaml and
// pitstop-medik8s.yaml as `make release` does and checks that their CRDs,
// RBAC, Deployment and webhooks are the chart's, with its defaults and
// with medik8sCompat.enabled=true.
func TestReleaseFileIsTheChartRendered(t *testing.T) {
	dir := t.TempDir()
	out, outMedik8s := filepath.Join(dir, "pitstop.yaml"), filepath.Join(dir, "pitstop-medik8s.yaml")
	cmd := exec.Command(repoPath(t, "hack", "release.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out, "OUT_MEDIK8S="+outMedik8s)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, b)
	}
	for _, tc := range []struct {
		file string
		set  []string
	}{{out, nil}, {outMedik8s, []string{"medik8sCompat.enabled=true"}}} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			data, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			release := decode(t, string(data))
			compareRelease(t, release, testutil.RenderChart(t, tc.set...))
			ns := find(release, "Namespace", "", namespace)
			if ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("the release's Namespace does not enforce the restricted Pod Security Standard: %v", ns)
			}
			medik8sCRDs := find(release, "CustomResourceDefinition", "", "nodemaintenances.nodemaintenance.medik8s.io") != nil &&
				find(release, "CustomResourceDefinition", "", "nodemaintenances.kubevirt.io") != nil
			if want := tc.set != nil; medik8sCRDs != want {
				t.Errorf("the medik8s and kubevirt.io CRDs in the release: %v, want %v", medik8sCRDs, want)
			}
		})
	}
}

// compareRelease checks that a release file holds the chart's CRDs, RBAC,
// Deployment and webhooks.
func compareRelease(t *testing.T, release, chart []*unstructured.Unstructured) {
	t.Helper()
	kinds := []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment", "ValidatingWebhookConfiguration"}
	for _, kind := range kinds {
		want, got := ofKind(chart, kind), ofKind(release, kind)
		if len(want) == 0 || len(want) != len(got) {
			t.Errorf("%d %s in the release, %d in the chart", len(got), kind, len(want))
			continue
		}
		for i := range want {
			if !equality.Semantic.DeepEqual(want[i].Object, got[i].Object) {
				t.Errorf("%s %s differs between the release and the chart", kind, want[i].GetName())
			}
		}
	}
}

// TestChartWebhooksAreTheManagers compares the chart's webhooks with the
// ones the manager defines, so that the two cannot drift apart.
func TestChartWebhooksAreTheManagers(t *testing.T) {
	for _, medik8s := range []bool{false, true} {
		t.Run(fmt.Sprintf("medik8sCompat=%v", medik8s), func(t *testing.T) {
			compareWebhooks(t, medik8s)
		})
	}
}

func compareWebhooks(t *testing.T, medik8s bool) {
	obj := find(testutil.RenderChart(t, fmt.Sprintf("medik8sCompat.enabled=%v", medik8s)), "ValidatingWebhookConfiguration", "", "pitstop-validating-webhook")
	if obj == nil {
		t.Fatal("the chart has no webhook configuration")
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, vwc); err != nil {
		t.Fatal(err)
	}
	want := manager.Webhooks(namespace, "pitstop-webhook", medik8s)
	if len(vwc.Webhooks) != len(want) {
		t.Fatalf("the chart has %d webhooks, the manager %d", len(vwc.Webhooks), len(want))
	}
	for i := range want {
		got := vwc.Webhooks[i].DeepCopy()
		// The chart spells out what the API server would default.
		got.ClientConfig.Service.Port = nil
		for j := range got.Rules {
			got.Rules[j].Scope = nil
		}
		if !equality.Semantic.DeepEqual(*got, want[i]) {
			g, _ := json.MarshalIndent(got, "", "  ")
			w, _ := json.MarshalIndent(want[i], "", "  ")
			t.Errorf("webhook %d differs:\nchart:   %s\nmanager: %s", i, g, w)
		}
	}
}

// assertAccessRoles checks that the ClusterRoles pitstop-dashboard-viewer
// and pitstop-metrics-reader grant get on their non-resource URL and
// nothing else, and that each is bound to the one subject of bound
// ("Kind/name" or "Kind/namespace/name"), or to nobody.
func assertAccessRoles(t *testing.T, objs []*unstructured.Unstructured, bound map[string]string) {
	t.Helper()
	for role, url := range map[string]string{"pitstop-dashboard-viewer": "/pitstop/dashboard", "pitstop-metrics-reader": "/metrics"} {
		obj := find(objs, "ClusterRole", "", role)
		if obj == nil {
			t.Errorf("no ClusterRole %s", role)
			continue
		}
		r := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, r); err != nil {
			t.Fatal(err)
		}
		want := []rbacv1.PolicyRule{{NonResourceURLs: []string{url}, Verbs: []string{"get"}}}
		if !equality.Semantic.DeepEqual(r.Rules, want) {
			t.Errorf("ClusterRole %s grants %+v, want %+v", role, r.Rules, want)
		}
		b := find(objs, "ClusterRoleBinding", "", role)
		switch {
		case bound[role] == "" && b != nil:
			t.Errorf("ClusterRole %s is bound though nobody is named", role)
		case bound[role] != "":
			binding := &rbacv1.ClusterRoleBinding{}
			if b != nil {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, binding); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, s := range binding.Subjects {
				got = append(got, strings.Join(slices.DeleteFunc([]string{s.Kind, s.Namespace, s.Name}, func(p string) bool { return p == "" }), "/"))
			}
			if binding.RoleRef.Name != role || !slices.Equal(got, []string{bound[role]}) {
				t.Errorf("ClusterRole %s is bound to %v (binding %q), want %s", role, got, binding.RoleRef.Name, bound[role])
			}
		}
	}
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	obj := find(objs, "Deployment", namespace, "pitstop")
	if obj == nil {
		t.Fatal("no Deployment pitstop")
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// assertArgs checks that the manager is started with every flag of want
// and none of the flags named in absent.
func assertArgs(t *testing.T, d *appsv1.Deployment, want, absent []string) {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("the manager is not started with %s: %v", w, args)
		}
	}
	for _, a := range absent {
		for _, arg := range args {
			if arg == a || strings.HasPrefix(arg, a+"=") {
				t.Errorf("the manager is started with %s", arg)
			}
		}
	}
}
