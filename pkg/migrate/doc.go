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

// Package migrate plans and applies the move of a cluster from
// nfs-subdir-external-provisioner or local-path-provisioner to provfleet,
// keeping the fate each old volume's directory was promised.
//
//   - In: the cluster as the old provisioner left it, read through a
//     client: its Deployment (the environment and arguments it runs with,
//     its image's release, whether it still runs), local-path's ConfigMap,
//     the StorageClasses and PersistentVolumes of its provisioner name.
//   - Out: a Plan, with the ProvisionerConfig that takes the old
//     provisioner's place, each old PersistentVolume's fate and the
//     annotations that record it, and a Refusal for each class, volume or
//     setting whose behaviour provfleet cannot keep. Write prints it;
//     Apply carries it out, records first and the ProvisionerConfig last,
//     and only for a plan with no refusal whose old provisioner is gone.
//   - Goroutines: none; every call runs on the caller's.
//
// A fate is decided as the old provisioner decides it at delete time: for
// nfs-subdir-external-provisioner by backend.NFSSubdir, the code the NFS
// backend records with itself, for local-path-provisioner by its reclaim
// and teardown rules, with the node it recorded on each volume
// (local.path.provisioner/selected-node). A fate recorded already, by hand
// or by an earlier run, is kept as it is. local-path-provisioner's setup
// script is read too: the lines of it that apply its class patterns
// become the hostPath backend's localPathPatterns.
package migrate
