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
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Build compiles cmd/manager of the repository at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cannot build the manager: %w\n%s", err, out)
	}
	return bin, nil
}

// WriteKubeconfig writes a kubeconfig file that authenticates like config
// (a bearer token or client certificates).
func WriteKubeconfig(path string, config *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["provfleet"] = &clientcmdapi.Cluster{
		Server:                   config.Host,
		CertificateAuthorityData: config.CAData,
		CertificateAuthority:     config.CAFile,
	}
	kc.AuthInfos["provfleet"] = &clientcmdapi.AuthInfo{
		Token:                 config.BearerToken,
		ClientCertificateData: config.CertData,
		ClientKeyData:         config.KeyData,
		ClientCertificate:     config.CertFile,
		ClientKey:             config.KeyFile,
	}
	kc.Contexts["provfleet"] = &clientcmdapi.Context{Cluster: "provfleet", AuthInfo: "provfleet"}
	kc.CurrentContext = "provfleet"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("cannot write kubeconfig %s: %w", path, err)
	}
	return nil
}

// Ports are handed out below the kernel's ephemeral range (32768 and up by
// default), where no outgoing connection takes one, and never twice by one
// process: a port that was free when picked can otherwise be taken before the
// process it was picked for binds it. The random start keeps test binaries
// that run at once apart.
const firstPort, lastPort = 20000, 32000

var ports = struct {
	sync.Mutex
	next int
}{next: firstPort + rand.IntN((lastPort-firstPort)/2)}

// FreeAddr returns a loopback address whose port is free now and was not
// returned before by this process.
func FreeAddr() (string, error) {
	ports.Lock()
	defer ports.Unlock()
	for ; ports.next < lastPort; ports.next++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports.next))
		if err != nil {
			continue
		}
		ports.next++
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			return "", fmt.Errorf("cannot release port %s: %w", addr, err)
		}
		return addr, nil
	}
	return "", errors.New("cannot find a free port: every port below the ephemeral range was handed out")
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
	// Args are further flags.
	Args []string
	// Output receives the process's stdout and stderr; nil discards them.
	Output io.Writer
}

// Process is a running manager.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	// MetricsURL and HealthURL are the base URLs of its endpoints.
	MetricsURL string
	HealthURL  string
}

// Start runs a manager with opts.
func Start(opts Options) (*Process, error) {
	var err error
	for _, addr := range []*string{&opts.MetricsAddr, &opts.HealthAddr} {
		if *addr == "" {
			if *addr, err = FreeAddr(); err != nil {
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
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = append(os.Environ(), "NODE_NAME="+opts.NodeName)
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	// Its own process group: a Ctrl-C reaches the caller, which stops the
	// manager before the control plane.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the manager: %w", err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), MetricsURL: "http://" + opts.MetricsAddr, HealthURL: "http://" + opts.HealthAddr}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Terminate sends SIGTERM and waits up to timeout for the exit, then kills.
// It returns the exit error, or an error when the timeout passed.
func (p *Process) Terminate(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("the manager did not exit within %v of SIGTERM", timeout)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitReady polls /readyz until it answers 200.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("the manager exited: %v", err)
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
