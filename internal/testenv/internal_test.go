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

package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadManifest(t *testing.T) {
	cases := map[string]struct {
		content string
		want    []string
	}{
		"documents in order, empty ones skipped": {
			content: "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n  namespace: a\n",
			want:    []string{"Namespace/a", "ServiceAccount/b"},
		},
		"a List is expanded": {
			content: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: creds}\n",
			want:    []string{"ConfigMap/x", "Secret/creds"},
		},
		"JSON": {
			content: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`,
			want:    []string{"ConfigMap/j"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "manifest.yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			objects, err := readManifest(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, obj := range objects {
				got = append(got, obj.GetKind()+"/"+obj.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadManifestRejectsBrokenYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, []byte("kind: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(path); err == nil {
		t.Fatal("want an error for broken YAML")
	}
}

func TestTail(t *testing.T) {
	cases := map[string]struct {
		content string
		n       int
		want    string
	}{
		"fewer lines than asked": {content: "a\nb\n", n: 5, want: "a\nb"},
		"last lines only":        {content: "1\n2\n3\n4\n", n: 2, want: "3\n4"},
		"no trailing newline":    {content: "1\n2\n3", n: 1, want: "3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tail(path, tc.n)); diff != "" {
				t.Errorf("tail (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartWithoutBinariesSaysHowToBuildThem(t *testing.T) {
	_, err := Start(t.Context(), Options{BinDir: t.TempDir(), CRDDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make controlplane") {
		t.Fatalf("want an error that names make controlplane, got %v", err)
	}
}

// A test binary that dies without Stop (a panic, a test timeout) closes the
// watchdog's stdin: the watchdog must kill the servers and remove the folder.
func TestWatchdogCleansUpWhenTheTestBinaryDies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "env")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := startWatchdog(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.disarm)
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill() })
	if err := w.watch(victim.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// What the kernel does when the test binary dies.
	if err := w.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("want the server killed by SIGKILL, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not kill the server")
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want the folder removed, got %v", err)
	}
}

// A clean Stop disarms the watchdog: it must not kill anything afterwards.
func TestDisarmedWatchdogKillsNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := startWatchdog(dir)
	if err != nil {
		t.Fatal(err)
	}
	survivor := exec.Command("sleep", "600")
	if err := survivor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = survivor.Process.Kill()
		_ = survivor.Wait()
	})
	if err := w.watch(survivor.Process.Pid); err != nil {
		t.Fatal(err)
	}
	w.disarm()
	// Signal 0 only checks that the process still exists.
	if err := survivor.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the disarmed watchdog killed the server: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the disarmed watchdog removed the folder: %v", err)
	}
}
