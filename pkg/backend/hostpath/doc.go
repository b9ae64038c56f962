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

// Package hostpath is the backend.hostPath provisioner: each claim gets a
// directory below a folder of one node's filesystem, exposed as a local
// PersistentVolume pinned to that node, or as a hostPath one. Beside each
// directory a hidden owner marker names its PersistentVolume, and the hidden
// folder .provfleet-unsaved at the top of the folder records the directories
// whose PersistentVolume is not known to exist yet, which the controller
// reclaims through provisioning.Reclaimer.
package hostpath
