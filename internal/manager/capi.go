package manager

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterAPICache limits the cache of Cluster API Machines to namespaces,
// when there are any. The Cluster API bridge acts only on the Machines it
// sees, so it then reads kubeconfig Secrets and BareMetalHosts only in
// those namespaces, where the chart grants it a Role (clusterAPI.namespaces),
// and lists and watches Machines there alone, which that Role allows.
func clusterAPICache(opts cache.Options, namespaces []string) cache.Options {
	if len(namespaces) == 0 {
		return opts
	}
	byNamespace := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		byNamespace[ns] = cache.Config{}
	}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&clusterv1.Machine{}] = cache.ByObject{Namespaces: byNamespace}
	return opts
}

// validateClusterAPINamespaces checks --cluster-api-namespaces.
func validateClusterAPINamespaces(clusterAPI bool, namespaces []string) error {
	if len(namespaces) > 0 && !clusterAPI {
		return &FlagError{"cluster-api-namespaces", strings.Join(namespaces, ","), "needs --cluster-api"}
	}
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return &FlagError{"cluster-api-namespaces", ns, errs[0]}
		}
	}
	return nil
}
