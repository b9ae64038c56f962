// Package hostpath is the backend.hostPath provisioner: each claim gets a
// directory below a folder of one node's filesystem, exposed as a local
// PersistentVolume pinned to that node, or as a hostPath one.
package hostpath
