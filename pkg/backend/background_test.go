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

package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provfleet/provfleet/pkg/backend"
)

// blocked is an operation that runs until its context ends.
func blocked(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// waitDone polls name until its operation finished.
func waitDone(t *testing.T, b *backend.Background[string], name string) (string, error) {
	t.Helper()
	for {
		result, done, err := b.Poll(t.Context(), name, func(context.Context) (string, error) {
			t.Fatalf("%s started again", name)
			return "", nil
		}, nil)
		if done {
			return result, err
		}
		if err != nil {
			t.Fatalf("Poll(%s): %v", name, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBackground: operations run at most a limit at once, each reported
// once when it finished; Cancel and Close stop them; a panic is an error.
func TestBackground(t *testing.T) {
	b := backend.NewBackground[string](2)
	for _, name := range []string{"a", "b"} {
		if _, done, err := b.Poll(t.Context(), name, blocked, nil); done || err != nil {
			t.Fatalf("Poll(%s) = done %v, %v; want started", name, done, err)
		}
	}
	if _, _, err := b.Poll(t.Context(), "c", blocked, nil); !errors.Is(err, backend.ErrBusy) {
		t.Fatalf("Poll(c) with two running: %v, want %v", err, backend.ErrBusy)
	}
	b.Cancel("a")
	if _, done, err := b.Poll(t.Context(), "c", func(context.Context) (string, error) { return "made", nil }, nil); done || err != nil {
		t.Fatalf("Poll(c) once a was cancelled = done %v, %v; want started", done, err)
	}
	if result, err := waitDone(t, b, "c"); result != "made" || err != nil {
		t.Fatalf("c finished with %q, %v; want made", result, err)
	}
	if _, _, err := b.Poll(t.Context(), "d", func(context.Context) (string, error) { panic("boom") }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := waitDone(t, b, "d"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("d finished with %v, want its panic", err)
	}
	b.Close()
	if _, err := waitDone(t, b, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("b finished with %v after Close, want %v", err, context.Canceled)
	}
	if _, _, err := b.Poll(t.Context(), "e", blocked, nil); err == nil {
		t.Fatal("Poll after Close started an operation")
	}
}

// TestBackgroundEnded: ended is called once an operation finished, when a
// Poll reports it done.
func TestBackgroundEnded(t *testing.T) {
	b := backend.NewBackground[string](1)
	defer b.Close()
	ended := make(chan struct{})
	if _, done, err := b.Poll(t.Context(), "a", func(context.Context) (string, error) { return "made", nil }, func() { close(ended) }); done || err != nil {
		t.Fatalf("Poll(a) = done %v, %v; want started", done, err)
	}
	<-ended
	result, done, err := b.Poll(t.Context(), "a", func(context.Context) (string, error) {
		t.Fatal("a started again")
		return "", nil
	}, nil)
	if !done || result != "made" || err != nil {
		t.Fatalf("Poll(a) once ended = %q, done %v, %v; want made, done", result, done, err)
	}
}

// TestBackgroundWakesTheBusy: a caller refused for want of a free slot has
// its ended called once a slot frees, and its next Poll starts it.
func TestBackgroundWakesTheBusy(t *testing.T) {
	b := backend.NewBackground[string](1)
	defer b.Close()
	if _, _, err := b.Poll(t.Context(), "a", blocked, nil); err != nil {
		t.Fatal(err)
	}
	woken := make(chan struct{})
	if _, _, err := b.Poll(t.Context(), "b", blocked, func() { close(woken) }); !errors.Is(err, backend.ErrBusy) {
		t.Fatalf("Poll(b) with a running: %v, want %v", err, backend.ErrBusy)
	}
	select {
	case <-woken:
		t.Fatal("b woken while a runs")
	default:
	}
	b.Cancel("a")
	<-woken
	if _, done, err := b.Poll(t.Context(), "b", func(context.Context) (string, error) { return "made", nil }, nil); done || err != nil {
		t.Fatalf("Poll(b) once woken = done %v, %v; want started", done, err)
	}
	if result, err := waitDone(t, b, "b"); result != "made" || err != nil {
		t.Fatalf("b finished with %q, %v; want made", result, err)
	}
}
