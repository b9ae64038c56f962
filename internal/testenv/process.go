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
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/provfleet/provfleet/internal/testenv/childproc"
)

// stopGracePeriod is how long a server may take to exit after SIGTERM.
const stopGracePeriod = 10 * time.Second

// server is one running control-plane binary whose output goes to a log file.
type server struct {
	*childproc.Process
}

func startServer(name, binary, logPath string, args ...string) (*server, error) {
	p, err := childproc.Start(name, binary, args, childproc.Options{LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return &server{Process: p}, nil
}

// exited returns an error when the server is no longer running.
func (s *server) exited() error {
	if exited, err := s.Exited(); exited {
		return fmt.Errorf("%s exited early (%w); its log:\n%s", s.Name(), err, tail(s.LogPath(), 40))
	}
	return nil
}

// stop sends SIGTERM, then SIGKILL after the grace period, and waits.
func (s *server) stop() {
	if exited, _ := s.Exited(); exited {
		return
	}
	_ = s.Terminate(stopGracePeriod)
}

// watchdogScript reads the PIDs of the servers from stdin. Its stdin is a pipe
// only the test binary holds, so EOF means the test binary died (a panic, a test
// timeout, SIGKILL) without stopping the Environment: the watchdog then kills the
// servers and removes the Environment's folder. A clean Stop kills the watchdog
// first.
const watchdogScript = `pids=""
while read -r pid; do pids="$pids $pid"; done
if [ -n "$pids" ]; then kill -9 $pids 2>/dev/null; fi
sleep 1
rm -rf "$1"
`

// watchdog cleans up after a test binary that died without calling Stop.
type watchdog struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startWatchdog(dir string) (*watchdog, error) {
	cmd := exec.Command("sh", "-c", watchdogScript, "provfleet-e2e-watchdog", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot create the watchdog pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, stdin: stdin}, nil
}

func (w *watchdog) watch(pid int) error {
	if _, err := io.WriteString(w.stdin, strconv.Itoa(pid)+"\n"); err != nil {
		return fmt.Errorf("cannot hand PID %d to the watchdog: %w", pid, err)
	}
	return nil
}

// disarm ends the watchdog without letting it kill anything.
func (w *watchdog) disarm() {
	_ = w.cmd.Process.Kill()
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
}

// tail returns about the last n lines of a file.
func tail(path string, n int) string {
	const maxRead = 256 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", filepath.Base(path), err)
	}
	offset := max(info.Size()-maxRead, 0)
	data := make([]byte, info.Size()-offset)
	if _, err := f.ReadAt(data, offset); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePort asks the kernel for a free loopback port. Another process may take it
// before the server binds it; Start reports that as the server exiting early.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
