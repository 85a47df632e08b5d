package testutil

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// StartLocalCluster starts a local cluster, stopped when the test ends,
// installs crds in it, and returns it with a client of pitstop's scheme.
func StartLocalCluster(t testing.TB, opts localcluster.Options, crds ...*apiextensionsv1.CustomResourceDefinition) (*localcluster.Cluster, client.Client) {
	t.Helper()
	cluster, err := localcluster.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) > 0 {
		if err := install.CRDs(t.Context(), c, crds); err != nil {
			t.Fatal(err)
		}
	}
	return cluster, c
}
