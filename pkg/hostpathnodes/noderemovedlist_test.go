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

package hostpathnodes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A volume listed again takes the place of the one of its name; what the
// agent released, by name and UID, leaves the list, and a list that names
// something released is pending.
func TestRemovedList(t *testing.T) {
	list := removedList{"a": {{Name: "pv-1", UID: "u1", OnDelete: "Delete"}, {Name: "pv-2", UID: "u2", OnDelete: "Retain"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	list.add("a", []removedVolume{{Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}})
	want := removedList{"a": {{Name: "pv-1", UID: "u1", OnDelete: "Delete"}, {Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Fatalf("after add (-want +got):\n%s", diff)
	}
	released := releasedVolumes{"a": {{Name: "pv-1", UID: "u1"}, {Name: "pv-2", UID: "u2"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	if !list.pending(released) {
		t.Error("a list naming released volumes is not pending")
	}
	if !list.drop(released) {
		t.Error("drop changed nothing")
	}
	// pv-2 of another UID is another volume: it stays.
	want = removedList{"a": {{Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("after drop (-want +got):\n%s", diff)
	}
	if list.pending(released) || list.drop(released) {
		t.Error("the released volumes are still listed")
	}
	data, err := list.encode()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := readRemovedList(&corev1.ConfigMap{Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(list, decoded); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

// The removed volumes an older manager kept on a Lease read as a list
// without UIDs.
func TestReadLegacyRemoved(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnRemovedVolumes: `{"a":{"pv-2":"Retain","pv-1":"Delete"}}`,
	}}}
	got, err := readLegacyRemoved(lease)
	if err != nil {
		t.Fatal(err)
	}
	want := removedList{"a": {{Name: "pv-1", OnDelete: "Delete"}, {Name: "pv-2", OnDelete: "Retain"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
