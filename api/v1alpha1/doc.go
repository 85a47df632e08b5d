// Package v1alpha1 holds pitstop's API types, group pitstop.dev, version
// v1alpha1: the objects users create to ask for maintenance and read to see
// what pitstop is doing. Validation lives here as OpenAPI and CEL markers so
// the API server refuses bad objects before any controller sees them. The
// package holds no behaviour beyond defaults and small pure helpers.
//
// +kubebuilder:object:generate=true
// +groupName=pitstop.dev
package v1alpha1
