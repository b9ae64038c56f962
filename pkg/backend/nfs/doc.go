// Package nfs is the backend.nfs provisioner: each claim gets a subdirectory of
// an NFS export that the manager's pod has mounted, exposed as an nfs
// PersistentVolume of that subdirectory. Beside each subdirectory a hidden
// owner marker names its PersistentVolume, and the hidden folder
// .provfleet-unsaved at the top of the export records the subdirectories whose
// PersistentVolume is not known to exist yet, which the controller reclaims
// through provisioning.Reclaimer.
package nfs
