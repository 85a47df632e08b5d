// Package scheme holds the runtime.Scheme with every type pitstop reads or
// writes. It is its own package so that tests and tools can use it without
// importing the manager and its controllers.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// New returns a scheme with the Kubernetes built-in types, CRDs and
// pitstop's API.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(pitstopv1alpha1.AddToScheme(s))
	utilruntime.Must(machinev1beta1.Install(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}
