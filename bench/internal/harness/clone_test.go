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

package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCloneEvents: a refusal of the data source is told from other
// failures, and a Pending clone is explained by the provisioner's latest
// Event rather than the binder's, which it repeats.
func TestCloneEvents(t *testing.T) {
	at := func(seconds int) time.Time { return time.Unix(int64(1000+seconds), 0) }
	waiting := corev1.Event{
		Reason: "ExternalProvisioning", Message: "Waiting for a volume to be created", Source: corev1.EventSource{Component: binder},
		LastTimestamp: metav1.NewTime(at(30)),
	}
	refused := corev1.Event{
		Reason: "ProvisioningFailed", Message: "p cannot fill a volume from data source PersistentVolumeClaim ns/source",
		EventTime: metav1.NewMicroTime(at(2)),
	}
	otherFailure := corev1.Event{Reason: "ProvisioningFailed", Message: "no space left", EventTime: metav1.NewMicroTime(at(5))}
	provisioning := corev1.Event{Reason: "Provisioning", Message: "External provisioner is provisioning", EventTime: metav1.NewMicroTime(at(1))}
	tests := map[string]struct {
		events      []corev1.Event
		wantRefusal string
		wantLast    string
	}{
		"none":                        {wantLast: "no Event"},
		"only the binder's":           {events: []corev1.Event{waiting}, wantLast: waiting.Message},
		"a refusal":                   {events: []corev1.Event{provisioning, waiting, refused}, wantRefusal: refused.Message, wantLast: refused.Message},
		"another failure, then none":  {events: []corev1.Event{otherFailure, waiting, provisioning}, wantLast: otherFailure.Message},
		"provisioning, still pending": {events: []corev1.Event{waiting, provisioning}, wantLast: provisioning.Message},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantRefusal, refusedDataSource(tt.events)); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLast, lastEvent(tt.events).Message); diff != "" {
				t.Errorf("last Event (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloneSection: each copy's throughput is the tree's bytes over its
// seconds, and its speed is told against cp -a's.
func TestCloneSection(t *testing.T) {
	st := treeStats{bytes: 100e6, files: 10, dirs: 3, symlinks: 2}
	section := cloneSection(st, []cloneResult{{"cp -a", 2}, {"hostpath clone", 4}, {"nfs clone", 10}})
	for _, want := range []string{
		"| cp -a | 2.00 | 50.0 | 1.00 |",
		"| hostpath clone | 4.00 | 25.0 | 0.50 |",
		"| nfs clone | 10.00 | 10.0 | 0.20 |",
		"A tree of 100.0 MB (10 files",
	} {
		if !strings.Contains(section.Body, want) {
			t.Errorf("the section lacks %q:\n%s", want, section.Body)
		}
	}
}
