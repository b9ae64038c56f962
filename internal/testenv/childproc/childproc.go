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
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Options shape one child process. The zero value inherits the environment
// and discards the output.
type Options struct {
	// Env is added to the environment of this process.
	Env []string
	// LogPath, when set, names a file created for stdout and stderr and closed
	// when the process ends; Output is then not used.
	LogPath string
	// Output receives stdout and stderr; nil discards them.
	Output io.Writer
}

// Process is a running child.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Start runs binary with args. name is how errors call the process.
func Start(name, binary string, args []string, opts Options) (*Process, error) {
	output := opts.Output
	var logFile *os.File
	if opts.LogPath != "" {
		var err error
		if logFile, err = os.Create(opts.LogPath); err != nil {
			return nil, fmt.Errorf("cannot create the log of %s: %w", name, err)
		}
		output = logFile
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdout, cmd.Stderr = output, output
	// Its own process group: a Ctrl-C meant for the caller must not kill the
	// child before the caller stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	p := &Process{name: name, logPath: opts.LogPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

// Pid is the process ID of the child.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is Options.LogPath.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// ErrExitedCleanly is how Exited reports an exit with status 0, which a
// server that should still run did no less unexpectedly than a crash.
var ErrExitedCleanly = errors.New("exited with status 0")

// Exited reports whether the process ended, and how: its exit error, or
// ErrExitedCleanly.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr == nil {
			return true, ErrExitedCleanly
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Terminate sends SIGTERM and waits up to grace for the exit, then kills.
// It returns the exit error, or an error when the grace period passed.
func (p *Process) Terminate(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, grace)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
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
}{next: firstPort + rand.IntN((lastPort-firstPort)/2)} //nolint:gosec // spreads test runs over ports, no secret

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
