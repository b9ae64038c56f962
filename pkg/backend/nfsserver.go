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

package backend

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DefaultNFSPort is where an NFS server serves NFS when mount options name
// no port.
const DefaultNFSPort = 2049

// NFSServer is the name under which the path index and the overlap checks
// know an NFS server: its host, with ",port=<port>" after it when the port is
// neither 0 (the default, or the portmapper's choice) nor DefaultNFSPort. Two
// servers on one address are two servers, and a host with its default port
// written or not is one.
func NFSServer(host string, port int) string {
	if port == 0 || port == DefaultNFSPort {
		return host
	}
	return host + ",port=" + strconv.Itoa(port)
}

// MountOptionPort returns the port that mount options give name ("port"
// for NFS, "mountport" for MOUNT): the last name=<port>, in an option of its
// own or in a comma-separated list, wins as with mount.nfs; 0 when they name
// none. A value that is not a port is an error.
func MountOptionPort(mountOptions []string, name string) (int, error) {
	port := 0
	for _, list := range mountOptions {
		for _, option := range strings.Split(list, ",") {
			value, ok := strings.CutPrefix(strings.TrimSpace(option), name+"=")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(value, 10, 16)
			if err != nil {
				return 0, fmt.Errorf("%s=%s is not a port", name, value)
			}
			port = int(n)
		}
	}
	return port, nil
}

// NFSServerOf returns the server of an nfs PersistentVolume as NFSServer
// names it; a port option that is not a port counts as none, as no backend
// makes such a volume.
func NFSServerOf(source *corev1.NFSVolumeSource, mountOptions []string) string {
	port, err := MountOptionPort(mountOptions, "port")
	if err != nil {
		port = 0
	}
	return NFSServer(source.Server, port)
}
