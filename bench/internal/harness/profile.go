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
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/provfleet/provfleet/bench/internal/report"
)

// profileTopNodes is how many functions of a profile the results show.
const profileTopNodes = "25"

// profile takes a CPU profile of the manager pid over d in the background,
// stores it under Work/profiles and sends the top of `go tool pprof` (or
// what went wrong) when done.
func (b *bench) profile(ctx context.Context, pid int, d time.Duration, name string) <-chan string {
	out := make(chan string, 1)
	b.mu.Lock()
	addr, ok := b.pprofAddrs[pid]
	b.mu.Unlock()
	if !ok {
		out <- fmt.Sprintf("no profiling endpoint for process %d", pid)
		return out
	}
	go func() {
		text, err := b.takeProfile(ctx, addr, d, name)
		if err != nil {
			text = err.Error()
		}
		out <- text
	}()
	return out
}

func (b *bench) takeProfile(ctx context.Context, addr string, d time.Duration, name string) (string, error) {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(int(d.Seconds()), 1))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot take a CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cannot take a CPU profile: %s", resp.Status)
	}
	dir := filepath.Join(b.cfg.Work, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", dir, err)
	}
	path := filepath.Join(dir, name+".pb.gz")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("cannot store the profile: %w", err)
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("cannot store the profile: %w", err)
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount="+profileTopNodes, b.bins.manager, path).Output()
	if err != nil {
		return "", fmt.Errorf("cannot read the profile %s: %w", path, err)
	}
	return string(top), nil
}

// addProfile waits for a profile started with profile and adds it to the
// results; a nil channel means none was taken.
func (b *bench) addProfile(ch <-chan string, title string) {
	if ch == nil {
		return
	}
	top := <-ch
	b.addSection(report.Section{
		Title: title,
		Body:  "```\n" + strings.TrimSpace(top) + "\n```",
	})
}
