// Package nfs is the backend.nfs provisioner: each claim gets a subdirectory of
// an NFS export that the manager's pod has mounted, exposed as an nfs
// PersistentVolume of that subdirectory.
package nfs
