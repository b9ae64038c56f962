/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package provisioning

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of claims and PersistentVolumes, as Kubernetes and
// external-provisioner name them.
const (
	// AnnStorageProvisioner names, on a claim, the provisioner the
	// PersistentVolume controller asks to provision it.
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// AnnBetaStorageProvisioner is the beta form of AnnStorageProvisioner,
	// still written beside it; read when the first is missing.
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnBetaStorageClass names a claim's StorageClass when its
	// spec.storageClassName is unset.
	AnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class"
	// AnnSelectedNode names, on a claim, the node its volume is made on:
	// the scheduler's choice for WaitForFirstConsumer, the coordinator's
	// placement for an Immediate hostPath claim.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnDynamicallyProvisioned names, on a PersistentVolume, the
	// provisioner that made it.
	AnnDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"

	// VolumeFinalizer keeps a provisioned PersistentVolume until its backend
	// volume was deleted (Config.Finalizer).
	VolumeFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
)

// Event reasons.
const (
	EventProvisioning          = "Provisioning"
	EventProvisioningFailed    = "ProvisioningFailed"
	EventProvisioningSucceeded = "ProvisioningSucceeded"
	EventCleanupFailed         = "ProvisioningCleanupFailed"
	EventVolumeFailedDelete    = "VolumeFailedDelete"
)

// IntentFinalizer returns the claim finalizer with which a provisioner whose
// backend is no Reclaimer records, before asking its backend for a volume,
// that a backend volume may exist for the claim. It is removed once the
// PersistentVolume exists or the backend volume was deleted, so a volume is
// never leaked even if the process dies in between.
func IntentFinalizer(provisionerName string) string {
	const prefix = "provfleet.io/"
	name := "provisioning-" + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, provisionerName)
	if len(validation.IsQualifiedName(prefix+name)) > 0 {
		sum := sha256.Sum256([]byte(provisionerName))
		name = "provisioning-" + hex.EncodeToString(sum[:8])
	}
	return prefix + name
}

// volumeNameFor is the deterministic name of a claim's PersistentVolume.
func volumeNameFor(claim *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

// StorageProvisioner is the provisioner a claim asks for: its
// storage-provisioner annotation, or the beta one.
func StorageProvisioner(claim *corev1.PersistentVolumeClaim) string {
	if name, ok := claim.Annotations[AnnStorageProvisioner]; ok {
		return name
	}
	return claim.Annotations[AnnBetaStorageProvisioner]
}

func claimClassName(claim *corev1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return claim.Annotations[AnnBetaStorageClass]
}

func claimRef(claim *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind:            "PersistentVolumeClaim",
		APIVersion:      "v1",
		Namespace:       claim.Namespace,
		Name:            claim.Name,
		UID:             claim.UID,
		ResourceVersion: claim.ResourceVersion,
	}
}
