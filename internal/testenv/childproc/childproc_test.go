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

package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provfleet/provfleet/internal/polltest"
)

// A clean exit is reported as one, so that a caller's message about a
// server that stopped says how.
func TestExitedReportsACleanExit(t *testing.T) {
	p, err := Start("child", "true", nil, Options{LogPath: filepath.Join(t.TempDir(), "child.log")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not exit")
	}
	if exited, err := p.Exited(); !exited || !errors.Is(err, ErrExitedCleanly) {
		t.Fatalf("want exited with ErrExitedCleanly, got exited=%v err=%v", exited, err)
	}
}

func TestStartWritesTheLogAndReportsTheExit(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	p, err := Start("child", "sh", []string{"-c", `echo "out $CHILD_VAR"; echo err >&2; exit 3`},
		Options{Env: []string{"CHILD_VAR=set"}, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not exit")
	}
	exited, err := p.Exited()
	var exitErr *exec.ExitError
	if !exited || !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("want exited with code 3, got exited=%v err=%v", exited, err)
	}
	data, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); got != "out set\nerr\n" {
		t.Fatalf("log %q, want %q", got, "out set\nerr\n")
	}
}

func TestTerminateWaitsForTheExit(t *testing.T) {
	p, err := Start("child", "sleep", []string{"600"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("the child exited before Terminate")
	}
	err = p.Terminate(30 * time.Second)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("want the exit by SIGTERM, got %v", err)
	}
}

// An ignored SIGTERM stays ignored across exec: sleep itself ignores it.
func TestTerminateKillsAfterTheGracePeriod(t *testing.T) {
	p, err := Start("stubborn child", "sh", []string{"-c", `trap "" TERM; echo ready; exec sleep 600`}, Options{LogPath: filepath.Join(t.TempDir(), "log")})
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, p, "ready")
	err = p.Terminate(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "stubborn child did not exit within 200ms of SIGTERM") {
		t.Fatalf("want an error that says the grace period passed, got %v", err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Fatal("the child still runs after Terminate")
	}
}

func TestStartOfAMissingBinaryNamesTheProcess(t *testing.T) {
	_, err := Start("ghost", filepath.Join(t.TempDir(), "missing"), nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot start ghost") {
		t.Fatalf("want an error that names the process, got %v", err)
	}
}

func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
}

func waitForLog(t *testing.T, p *Process, want string) {
	t.Helper()
	polltest.Eventually(t, fmt.Sprintf("the log saying %q", want), func() bool {
		data, _ := os.ReadFile(p.LogPath())
		return strings.Contains(string(data), want)
	})
}
