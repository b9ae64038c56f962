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

package managerproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/provfleet/provfleet/internal/testenv/childproc"
)

// BinaryEnv names the environment variable that points at a manager binary
// built from the tree under test beforehand: make builds it before the tests
// it times, so that compiling it counts against no test's timeout.
const BinaryEnv = "PROVFLEET_MANAGER_BIN"

// Build returns the binary $PROVFLEET_MANAGER_BIN names, when set; else it
// compiles cmd/manager of the repository at root into dir and returns the
// binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("cannot use the manager of %s: %w", BinaryEnv, err)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cannot build the manager: %w\n%s", err, out)
	}
	return bin, nil
}

// Options start one manager process.
type Options struct {
	Binary     string
	Kubeconfig string
	Namespace  string
	Identity   string
	// HostPathRoot is --host-path-root; NodeName is its NODE_NAME.
	HostPathRoot string
	NodeName     string
	// MetricsAddr and HealthAddr are host:port; empty picks free ports.
	MetricsAddr string
	HealthAddr  string
	// Args are further flags; Env further environment variables.
	Args []string
	Env  []string
	// LogPath, when set, names a file created for the process's stdout and
	// stderr; else Output receives them, and nil discards them.
	LogPath string
	Output  io.Writer
}

// Process is a running manager: Done, Exited, Terminate and Kill are those of
// its child process.
type Process struct {
	*childproc.Process
	// MetricsURL and HealthURL are the base URLs of its endpoints.
	MetricsURL string
	HealthURL  string
}

// Start runs a manager with opts.
func Start(opts Options) (*Process, error) {
	var err error
	for _, addr := range []*string{&opts.MetricsAddr, &opts.HealthAddr} {
		if *addr == "" {
			if *addr, err = childproc.FreeAddr(); err != nil {
				return nil, err
			}
		}
	}
	args := append([]string{
		"--kubeconfig=" + opts.Kubeconfig,
		"--namespace=" + opts.Namespace,
		"--identity=" + opts.Identity,
		"--host-path-root=" + opts.HostPathRoot,
		"--metrics-bind-address=" + opts.MetricsAddr,
		"--health-probe-bind-address=" + opts.HealthAddr,
	}, opts.Args...)
	p, err := childproc.Start("the manager", opts.Binary, args, childproc.Options{
		Env:     append([]string{"NODE_NAME=" + opts.NodeName}, opts.Env...),
		LogPath: opts.LogPath,
		Output:  opts.Output,
	})
	if err != nil {
		return nil, err
	}
	return &Process{Process: p, MetricsURL: "http://" + opts.MetricsAddr, HealthURL: "http://" + opts.HealthAddr}, nil
}

// WaitReady polls /readyz until it answers 200.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("the manager exited: %w", err)
		}
		_, err := p.get(ctx, p.HealthURL+"/readyz")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the manager never got ready: %w", err)
	}
	return nil
}

// Metrics returns the text of /metrics.
func (p *Process) Metrics(ctx context.Context) (string, error) {
	return p.get(ctx, p.MetricsURL+"/metrics")
}

func (p *Process) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), errors.New(resp.Status)
	}
	return string(body), nil
}
