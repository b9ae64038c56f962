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

package faultproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upstream is a stand-in apiserver: it counts requests, names their
// method and bearer token in its answer, and streams a line a tick to a
// watch until the client goes.
type upstream struct {
	*httptest.Server
	requests atomic.Int64
	lines    chan string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{lines: make(chan string)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		if isWatch(r) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				select {
				case line := <-u.lines:
					_, _ = fmt.Fprintln(w, line)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		_, _ = fmt.Fprintf(w, "%s %s", r.Method, r.Header.Get("Authorization"))
	}))
	t.Cleanup(u.Close)
	return u
}

func newProxy(t *testing.T, u *upstream, opts Options) *Proxy {
	t.Helper()
	target, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.Upstream, opts.Transport = target, u.Client().Transport
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// client is a process's view of its endpoint: its address, and an HTTP
// client that trusts it.
type client struct {
	addr string
	http *http.Client
}

func openEndpoint(t *testing.T, p *Proxy, name string) client {
	t.Helper()
	addr, caPEM, err := p.Endpoint(name)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("the endpoint's certificate is no PEM: %q", caPEM)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(transport.CloseIdleConnections)
	return client{addr: addr, http: &http.Client{Transport: transport}}
}

// reply is what a client saw of one request.
type reply struct {
	Code       int
	Body       string
	Reason     metav1.StatusReason
	RetryAfter string
	Reached    bool // the upstream saw it
}

func send(t *testing.T, u *upstream, c client, method string) reply {
	t.Helper()
	before := u.requests.Load()
	req, err := http.NewRequestWithContext(t.Context(), method, c.addr+"/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-of-the-caller")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Reached: u.requests.Load() > before}
	var status metav1.Status
	if json.Unmarshal(body, &status) == nil && status.Kind == "Status" {
		r.Reason = status.Reason
	} else {
		r.Body = string(body)
	}
	return r
}

// Each fault, drawn by every request, does what it names; the caller's
// token reaches the upstream untouched.
func TestFaults(t *testing.T) {
	cases := map[string]struct {
		rates  Rates
		method string
		want   reply
	}{
		"none": {
			method: http.MethodGet,
			want:   reply{Code: http.StatusOK, Body: "GET Bearer token-of-the-caller", Reached: true},
		},
		"error, never sent on": {
			rates: Rates{Error: 1}, method: http.MethodPost,
			want: reply{Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError},
		},
		"throttle with Retry-After, never sent on": {
			rates: Rates{Throttle: 1}, method: http.MethodGet,
			want: reply{Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: "1"},
		},
		"lost reply of a write that was carried out": {
			rates: Rates{LostReply: 1}, method: http.MethodPatch,
			want: reply{Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Reached: true},
		},
		"a read draws no lost reply": {
			rates: Rates{LostReply: 1}, method: http.MethodGet,
			want: reply{Code: http.StatusOK, Body: "GET Bearer token-of-the-caller", Reached: true},
		},
		"slow, then sent on": {
			rates: Rates{Slow: 1}, method: http.MethodDelete,
			want: reply{Code: http.StatusOK, Body: "DELETE Bearer token-of-the-caller", Reached: true},
		},
		"a request that is no watch draws no cut": {
			rates: Rates{CutWatch: 1}, method: http.MethodPut,
			want: reply{Code: http.StatusOK, Body: "PUT Bearer token-of-the-caller", Reached: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t)
			p := newProxy(t, u, Options{Rates: tc.rates, SlowDelay: time.Millisecond})
			got := send(t, u, openEndpoint(t, p, "manager"), tc.method)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

// A timeout answers nothing: the client gives up and the upstream never
// sees the request.
func TestTimeout(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u, Options{Rates: Rates{Timeout: 1}})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	c := openEndpoint(t, p, "agent")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.addr+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a held request was answered %s", resp.Status)
	}
	if u.requests.Load() != 0 {
		t.Errorf("the upstream saw %d requests, want none", u.requests.Load())
	}
	if diff := cmp.Diff(map[Fault]int{Timeout: 1}, p.Injected()); diff != "" {
		t.Errorf("faults injected (-want +got):\n%s", diff)
	}
}

// openWatch starts a watch through addr and returns its lines.
func openWatch(t *testing.T, c client) (*bufio.Scanner, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.addr+"/api/v1/pods?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return bufio.NewScanner(resp.Body), func() { cancel(); resp.Body.Close() }
}

// A cut watch streams its events, then ends before its client or the
// upstream ends it.
func TestCutWatch(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u, Options{Rates: Rates{CutWatch: 1}, WatchCutAfter: 300 * time.Millisecond})
	lines, stop := openWatch(t, openEndpoint(t, p, "manager"))
	defer stop()
	ended := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(ended)
	}()
	for {
		select {
		case u.lines <- "event":
			continue
		case <-ended:
		case <-time.After(time.Minute):
			t.Fatal("the watch was not cut")
		}
		break
	}
	if diff := cmp.Diff(map[Fault]int{CutWatch: 1}, p.Injected()); diff != "" {
		t.Errorf("faults injected (-want +got):\n%s", diff)
	}
}

// A watch that drew no cut at its start draws one for every period it
// streams: the longer it lives, the likelier its cut.
func TestStreamCut(t *testing.T) {
	const period = 10 * time.Second
	for name, tc := range map[string]struct {
		cutNow         bool
		rate, u, extra float64
		want           time.Duration
	}{
		"cut drawn at the start":         {cutNow: true, rate: 0.1, u: 0.99, extra: 0.5, want: 5 * time.Second},
		"no cuts":                        {rate: 0, u: 0.5, extra: 0.5, want: 0},
		"a cut every period":             {rate: 1, u: 0.99, extra: 0.25, want: 12500 * time.Millisecond},
		"cut in the first period drawn":  {rate: 0.5, u: 0.25, extra: 0, want: period},
		"cut in the second period drawn": {rate: 0.5, u: 0.6, extra: 0, want: 2 * period},
		"a rare cut comes late":          {rate: 0.01, u: 0.5, extra: 0, want: 69 * period},
		"later than a duration can say":  {rate: 1e-300, u: 0.5, extra: 0, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, streamCut(tc.cutNow, tc.rate, tc.u, tc.extra, period)); diff != "" {
				t.Errorf("cut after (-want +got):\n%s", diff)
			}
		})
	}
}

// A partitioned endpoint answers nothing and its open watch delivers
// nothing; restored, the watch delivers what was held and requests pass
// again. Other endpoints are not concerned.
func TestPartition(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u, Options{})
	cut, other := openEndpoint(t, p, "replica-1"), openEndpoint(t, p, "replica-2")
	lines, stop := openWatch(t, cut)
	defer stop()
	read := make(chan string)
	go func() {
		for lines.Scan() {
			read <- lines.Text()
		}
		close(read)
	}()
	u.lines <- "before"
	if got := <-read; got != "before" {
		t.Fatalf("watch delivered %q, want %q", got, "before")
	}

	if err := p.Partition("replica-1", true); err != nil {
		t.Fatal(err)
	}
	u.lines <- "during"
	select {
	case got := <-read:
		t.Fatalf("a partitioned watch delivered %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cut.addr+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := cut.http.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a partitioned endpoint answered %s", resp.Status)
	}
	if got := send(t, u, other, http.MethodGet); got.Code != http.StatusOK {
		t.Errorf("another endpoint answered %d while one was partitioned", got.Code)
	}

	if err := p.Partition("replica-1", false); err != nil {
		t.Fatal(err)
	}
	if got := <-read; got != "during" {
		t.Errorf("restored watch delivered %q, want %q", got, "during")
	}
	if got := send(t, u, cut, http.MethodGet); got.Code != http.StatusOK {
		t.Errorf("the restored endpoint answered %d", got.Code)
	}
}

// The seed fixes each endpoint's schedule: the same seed draws the same
// faults for the same requests, another seed other faults.
func TestSeedReplaysTheSchedule(t *testing.T) {
	schedule := func(seed uint64) string {
		u := newUpstream(t)
		p := newProxy(t, u, Options{Seed: seed, Rates: Rates{Error: 0.3, Throttle: 0.3}})
		addr := openEndpoint(t, p, "agent-node-1")
		var codes strings.Builder
		for range 40 {
			fmt.Fprintf(&codes, "%d ", send(t, u, addr, http.MethodGet).Code)
		}
		return codes.String()
	}
	first := schedule(7)
	if again := schedule(7); again != first {
		t.Errorf("seed 7 drew\n%s\nthen\n%s", first, again)
	}
	if other := schedule(8); other == first {
		t.Errorf("seeds 7 and 8 drew the same schedule %s", first)
	}
}

func TestRatesRefused(t *testing.T) {
	cases := map[string]struct {
		rates Rates
		want  string
	}{
		"negative":    {rates: Rates{Slow: -0.1}, want: "the rate of slow is -0.1"},
		"more than 1": {rates: Rates{Error: 1.5}, want: "the rate of error is 1.5"},
		"sum above 1": {rates: Rates{Error: 0.6, Timeout: 0.6}, want: "add up to 1.2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t)
			target, _ := url.Parse(u.URL)
			_, err := New(Options{Upstream: target, Transport: u.Client().Transport, Rates: tc.rates})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if err := Uniform(0.1).validate(); err != nil {
		t.Errorf("Uniform(0.1): %v", err)
	}
}

// SetRates turns faults off (and on) from the next request, and refuses
// rates New would refuse.
func TestSetRates(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u, Options{Rates: Rates{Error: 1}})
	c := openEndpoint(t, p, "manager")
	if got := send(t, u, c, http.MethodGet); got.Code != http.StatusInternalServerError {
		t.Fatalf("before SetRates: %+v, want an injected 500", got)
	}
	if err := p.SetRates(Rates{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reply{Code: http.StatusOK, Body: "GET Bearer token-of-the-caller", Reached: true}, send(t, u, c, http.MethodGet)); diff != "" {
		t.Errorf("after faults were turned off (-want +got):\n%s", diff)
	}
	if err := p.SetRates(Rates{Error: 2}); err == nil || !strings.Contains(err.Error(), "the rate of error is 2") {
		t.Errorf("SetRates of a rate above 1: %v, want it refused", err)
	}
	if diff := cmp.Diff(map[Fault]int{Error: 1}, p.Injected()); diff != "" {
		t.Errorf("faults injected (-want +got):\n%s", diff)
	}
}
