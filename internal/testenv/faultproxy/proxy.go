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
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fault is what the proxy does to one request.
type Fault string

// The faults, each drawn with its rate in Rates.
const (
	// None passes the request on untouched.
	None Fault = ""
	// Error answers 500 without passing the request on.
	Error Fault = "error"
	// Throttle answers 429 with Retry-After without passing it on.
	Throttle Fault = "throttle"
	// LostReply passes a write on and answers 500 whatever the apiserver
	// did: the write may have been carried out. Reads draw None instead.
	LostReply Fault = "lost-reply"
	// Timeout holds the request until the client gives up or HoldLimit
	// passes, then drops the connection without an answer.
	Timeout Fault = "timeout"
	// Slow passes the request on after SlowDelay.
	Slow Fault = "slow"
	// CutWatch passes a watch on and ends its stream after a random share
	// of WatchCutAfter. Other requests draw None instead. A watch is a
	// request that lasts: one that drew no cut at its start draws it again,
	// at its rate, for every WatchCutAfter it streams.
	CutWatch Fault = "cut-watch"
)

// Rates are the shares of requests, from 0 to 1, that draw each fault;
// together at most 1.
type Rates struct {
	Error, Throttle, LostReply, Timeout, Slow, CutWatch float64
}

// Uniform spreads rate evenly over every fault.
func Uniform(rate float64) Rates {
	each := rate / 6
	return Rates{Error: each, Throttle: each, LostReply: each, Timeout: each, Slow: each, CutWatch: each}
}

func (r Rates) order() []struct {
	fault Fault
	rate  float64
} {
	return []struct {
		fault Fault
		rate  float64
	}{
		{Error, r.Error}, {Throttle, r.Throttle}, {LostReply, r.LostReply},
		{Timeout, r.Timeout}, {Slow, r.Slow}, {CutWatch, r.CutWatch},
	}
}

func (r Rates) validate() error {
	sum := 0.0
	for _, f := range r.order() {
		if f.rate < 0 || f.rate > 1 {
			return fmt.Errorf("the rate of %s is %v, not between 0 and 1", f.fault, f.rate)
		}
		sum += f.rate
	}
	if sum > 1 {
		return fmt.Errorf("the rates add up to %v, more than 1", sum)
	}
	return nil
}

// Options configure a Proxy.
type Options struct {
	// Upstream is the apiserver's URL.
	Upstream *url.URL
	// Transport reaches it, trusting its certificate; it carries no
	// credentials of its own.
	Transport http.RoundTripper
	// Seed fixes the fault schedule of every endpoint.
	Seed uint64
	// Rates are the faults' shares; the zero value injects none.
	Rates Rates
	// SlowDelay is how long a Slow request waits; one second when 0.
	SlowDelay time.Duration
	// WatchCutAfter bounds how long a cut watch streams; ten seconds when 0.
	WatchCutAfter time.Duration
	// HoldLimit bounds how long a Timeout holds a request whose client
	// waits on; one minute when 0.
	HoldLimit time.Duration
}

// Proxy is the fault-injecting proxy of one test run.
type Proxy struct {
	opts Options

	mu        sync.Mutex
	rates     Rates
	endpoints map[string]*endpoint
	injected  map[Fault]int
	closed    bool
}

// New returns a Proxy with no endpoint yet.
func New(opts Options) (*Proxy, error) {
	if opts.Upstream == nil || opts.Transport == nil {
		return nil, errors.New("cannot make a fault proxy without an upstream and its transport")
	}
	if err := opts.Rates.validate(); err != nil {
		return nil, fmt.Errorf("cannot make a fault proxy: %w", err)
	}
	if opts.SlowDelay == 0 {
		opts.SlowDelay = time.Second
	}
	if opts.WatchCutAfter == 0 {
		opts.WatchCutAfter = 10 * time.Second
	}
	if opts.HoldLimit == 0 {
		opts.HoldLimit = time.Minute
	}
	return &Proxy{opts: opts, rates: opts.Rates, endpoints: map[string]*endpoint{}, injected: map[Fault]int{}}, nil
}

// SetRates changes the faults' shares from the next request on: a run
// turns them off to see the system converge.
func (p *Proxy) SetRates(rates Rates) error {
	if err := rates.validate(); err != nil {
		return fmt.Errorf("cannot change the fault rates: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rates = rates
	return nil
}

// endpoint is the listener of one process and its fault schedule.
type endpoint struct {
	name   string
	server *httptest.Server

	mu          sync.Mutex
	rand        *rand.Rand
	partitioned chan struct{} // closed when the partition ends; nil when none
}

// Endpoint returns the https:// address of the endpoint name, starting it
// the first time, and the PEM certificate that its clients trust: a client
// sends its credentials over TLS only.
func (p *Proxy) Endpoint(name string) (addr string, caPEM []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", nil, errors.New("cannot open an endpoint: the fault proxy is closed")
	}
	e, ok := p.endpoints[name]
	if !ok {
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		e = &endpoint{name: name, rand: rand.New(rand.NewPCG(p.opts.Seed, h.Sum64()))} //nolint:gosec // a replayable schedule, no secret
		e.server = httptest.NewUnstartedServer(p.handler(e))
		e.server.EnableHTTP2 = true
		e.server.StartTLS()
		p.endpoints[name] = e
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.server.Certificate().Raw})
	return e.server.URL, caPEM, nil
}

// Partition cuts the endpoint name off (on) or restores it: cut off, it
// answers no request and its open streams send nothing, as a dropped
// network would, until restored.
func (p *Proxy) Partition(name string, on bool) error {
	p.mu.Lock()
	e, ok := p.endpoints[name]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("cannot partition endpoint %s: there is none", name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case on && e.partitioned == nil:
		e.partitioned = make(chan struct{})
	case !on && e.partitioned != nil:
		close(e.partitioned)
		e.partitioned = nil
	}
	return nil
}

// Injected returns how many requests drew each fault so far, and how many
// watch streams were cut.
func (p *Proxy) Injected() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.injected))
	for f, n := range p.injected {
		out[f] = n
	}
	return out
}

// Close stops every endpoint, cutting open streams.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	endpoints := p.endpoints
	p.endpoints = map[string]*endpoint{}
	p.mu.Unlock()
	for _, e := range endpoints {
		e.mu.Lock()
		if e.partitioned != nil {
			close(e.partitioned)
			e.partitioned = nil
		}
		e.mu.Unlock()
		e.server.CloseClientConnections()
		e.server.Close()
	}
}

// draw is the fault of the endpoint's next request, and a number in [0, 1)
// for the fault's own choices.
func (p *Proxy) draw(e *endpoint, r *http.Request) (Fault, float64) {
	e.mu.Lock()
	x, extra := e.rand.Float64(), e.rand.Float64()
	e.mu.Unlock()
	p.mu.Lock()
	rates := p.rates
	p.mu.Unlock()
	fault := None
	for _, f := range rates.order() {
		if x < f.rate {
			fault = f.fault
			break
		}
		x -= f.rate
	}
	switch {
	case fault == LostReply && !isWrite(r), fault == CutWatch && !isWatch(r):
		fault = None
	}
	// A cut is counted when it happens: the stream may end before.
	if fault != None && fault != CutWatch {
		p.mu.Lock()
		p.injected[fault]++
		p.mu.Unlock()
	}
	return fault, extra
}

// partition is the channel closed when e's partition ends, nil when none.
func (e *endpoint) partition() chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.partitioned
}

func (p *Proxy) handler(e *endpoint) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.opts.Upstream)
			pr.Out.Host = p.opts.Upstream.Host
		},
		Transport:     p.opts.Transport,
		FlushInterval: -1, // watches stream every event at once
		// Cut streams and clients that give up are what it is for.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait := e.partition(); wait != nil {
			select {
			case <-wait:
			case <-r.Context().Done():
				// A dropped network answers nothing, not even the empty
				// 200 a handler that returns would send.
				panic(http.ErrAbortHandler)
			}
		}
		fault, extra := p.draw(e, r)
		switch fault {
		case Error:
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected: the apiserver failed this request")
		case Throttle:
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected: too many requests, retry after 1s")
		case Timeout:
			p.hold(w, r)
		case Slow:
			select {
			case <-time.After(p.opts.SlowDelay):
			case <-r.Context().Done():
				panic(http.ErrAbortHandler)
			}
			p.forward(proxy, e, w, r, p.cutAfter(e, r, fault, extra))
		case LostReply:
			rec := &discardWriter{header: http.Header{}}
			proxy.ServeHTTP(rec, r)
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected: the reply to this write was lost")
		default:
			p.forward(proxy, e, w, r, p.cutAfter(e, r, fault, extra))
		}
	})
}

// cutAfter is when the stream of r, which drew fault at its start, is to be
// cut; 0 for never: r is no watch, or no cut was drawn.
func (p *Proxy) cutAfter(e *endpoint, r *http.Request, fault Fault, extra float64) time.Duration {
	if !isWatch(r) {
		return 0
	}
	p.mu.Lock()
	rate := p.rates.CutWatch
	p.mu.Unlock()
	e.mu.Lock()
	u := e.rand.Float64()
	e.mu.Unlock()
	return streamCut(fault == CutWatch, rate, u, extra, p.opts.WatchCutAfter)
}

// streamCut is when a stream is cut: within its first period when its
// start drew the cut (cutNow), else after as many whole periods as a cut
// of the given rate per period takes to come, drawn from u in [0, 1) (the
// geometric law), plus the share extra of one; 0 for never.
func streamCut(cutNow bool, rate, u, extra float64, period time.Duration) time.Duration {
	switch {
	case cutNow:
		return time.Duration(extra * float64(period))
	case rate <= 0:
		return 0
	case rate >= 1:
		return time.Duration((1 + extra) * float64(period))
	}
	periods := 1 + math.Floor(math.Log1p(-u)/math.Log1p(-rate))
	if limit := float64(math.MaxInt64) / float64(period); periods+extra >= limit {
		return 0
	}
	return time.Duration((periods + extra) * float64(period))
}

// forward passes r on; cutAfter, when not 0, ends the reply's stream then,
// unless the faults were turned off meanwhile. While e is cut off the
// stream sends nothing.
func (p *Proxy) forward(proxy *httputil.ReverseProxy, e *endpoint, w http.ResponseWriter, r *http.Request, cutAfter time.Duration) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if cutAfter > 0 {
		timer := time.AfterFunc(cutAfter, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.rates.CutWatch > 0 && ctx.Err() == nil {
				p.injected[CutWatch]++
				cancel()
			}
		})
		defer timer.Stop()
	}
	proxy.ServeHTTP(&stallingWriter{ResponseWriter: w, endpoint: e, ctx: ctx}, r.WithContext(ctx))
}

// hold keeps r unanswered until its client gives up or HoldLimit passes,
// then drops the connection.
func (p *Proxy) hold(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(p.opts.HoldLimit):
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// stallingWriter writes nothing while its endpoint is cut off, as a
// dropped network delivers nothing; it gives up when ctx ends.
type stallingWriter struct {
	http.ResponseWriter
	endpoint *endpoint
	ctx      context.Context
}

func (s *stallingWriter) Write(b []byte) (int, error) {
	if wait := s.endpoint.partition(); wait != nil {
		select {
		case <-wait:
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes flushes on, so watch events stream.
func (s *stallingWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// discardWriter takes a reply nobody will see.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (d *discardWriter) WriteHeader(int)             {}

// writeStatus answers with a metav1.Status of code, reason and message, as
// the apiserver does.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code), //nolint:gosec // an HTTP status
	}
	body, err := json.Marshal(status)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func isWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func isWatch(r *http.Request) bool {
	switch r.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}
