// Package v1alpha1 is the provfleet.io/v1alpha1 API: the cluster-scoped
// ProvisionerConfig, one object per volume provisioner run by the fleet manager.
// Validation and defaults live in kubebuilder markers, so the CRD generated from
// these types refuses bad objects at the apiserver.
//
// +kubebuilder:object:generate=true
// +groupName=provfleet.io
package v1alpha1
