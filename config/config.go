// Package config embeds the generated manifests so the pitstop binary can
// install its own CRDs (`pitstop dev`, the test suites) without reading
// files from a checkout. The YAML files are the source of truth for
// kustomize and Helm; this package only reads them.
package config

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crd/bases/*.yaml crd/machineapi/machine.openshift.io_*.yaml crd/medik8s/*.yaml crd/kvm/*.yaml
var crdFiles embed.FS

//go:embed samples/*.yaml
var sampleFiles embed.FS

// Sample returns a file of config/samples, by name.
func Sample(name string) ([]byte, error) {
	return sampleFiles.ReadFile("samples/" + name)
}

// CRDs returns pitstop's CustomResourceDefinitions as controller-gen wrote
// them to config/crd/bases.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsIn("crd/bases/*.yaml")
}

// MachineAPICRDs returns the machine.openshift.io/v1beta1 Machine,
// MachineSet and MachineHealthCheck CRDs, as the openshift/api module in
// go.mod defines them.
func MachineAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsIn("crd/machineapi/machine.openshift.io_*.yaml")
}

// Medik8sCRDs returns the NodeMaintenance CRDs pitstop ships for
// --medik8s-compat: nodemaintenance.medik8s.io/v1beta1 and kubevirt.io/v1alpha3.
func Medik8sCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsIn("crd/medik8s/*.yaml")
}

// KVMCRDs returns the kvm.cloud.sap/v1 Hypervisor CRD of the OpenStack
// hypervisor operator, written from its API's types.
func KVMCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsIn("crd/kvm/*.yaml")
}

func crdsIn(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := fs.Glob(crdFiles, pattern)
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, path := range paths {
		data, err := crdFiles.ReadFile(path)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(bytes.TrimPrefix(data, []byte("---\n")), crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
