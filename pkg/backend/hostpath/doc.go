// Package hostpath is the backend.hostPath provisioner: each claim gets a
// directory below a folder of one node's filesystem, exposed as a local
// PersistentVolume pinned to that node, or as a hostPath one. Beside each
// directory a hidden owner marker names its PersistentVolume, and the hidden
// folder .provfleet-unsaved at the top of the folder records the directories
// whose PersistentVolume is not known to exist yet, which the controller
// reclaims through provisioning.Reclaimer.
package hostpath
