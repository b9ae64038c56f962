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

package backendtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Claim returns a filesystem claim requesting size.
func Claim(namespace, name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size),
			}},
		},
	}
}

// Options returns the provision options of a claim of class, with the PV
// name the controller derives from the claim's UID.
func Options(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) provisioning.ProvisionOptions {
	return provisioning.ProvisionOptions{StorageClass: class, PVName: "pvc-" + string(claim.UID), PVC: claim}
}

// Class returns a StorageClass with the given parameters.
func Class(parameters map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Parameters: parameters}
}

// Entry is what a snapshot records of one file.
type Entry struct {
	Mode    fs.FileMode
	Content string
}

// Snapshot records every file, directory and symlink below dir, without
// following symlinks, except the subtree skip (empty: none).
func Snapshot(t testing.TB, dir, skip string) map[string]Entry {
	t.Helper()
	entries := map[string]Entry{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == skip {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entry := Entry{Mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			entry.Content, err = os.Readlink(path)
		case info.Mode().IsRegular():
			var data []byte
			data, err = os.ReadFile(path)
			entry.Content = string(data)
		}
		entries[path] = entry
		return err
	})
	if err != nil {
		t.Fatalf("cannot snapshot %s: %v", dir, err)
	}
	return entries
}

// Tree lists what lies below dir, sorted, directories with a trailing slash.
func Tree(t testing.TB, dir string) []string {
	t.Helper()
	var got []string
	for path, entry := range Snapshot(t, dir, "") {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			t.Fatal(err)
		}
		if rel == "." {
			continue
		}
		if entry.Mode.IsDir() {
			rel += "/"
		}
		got = append(got, rel)
	}
	slices.Sort(got)
	return got
}

// WriteFile writes a file, creating its folders, or fails the test.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Symlink plants a symlink or fails the test.
func Symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// CheckNewError fails the test unless the error of a backend's New is nil
// when wantErr is empty, or wraps want and contains wantErr.
func CheckNewError(t testing.TB, err, want error, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) || !errors.Is(err, want) {
		t.Fatalf("New() error = %v, want %v containing %q", err, want, wantErr)
	}
}
