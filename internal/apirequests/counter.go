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

package apirequests

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Counter counts the API requests a process sends, labelled the way the
// apiserver labels apiserver_request_total.
type Counter struct {
	total *prometheus.CounterVec
	infos *apirequest.RequestInfoFactory
}

// MetricName is the counter's name.
const MetricName = "provfleet_api_requests_total"

// NewCounter registers the counter on reg.
func NewCounter(reg prometheus.Registerer) (*Counter, error) {
	c := &Counter{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricName,
			Help: "API requests sent by this process, by verb, resource (with /subresource) and response code; code is empty when no response came.",
		}, []string{"verb", "resource", "code"}),
		infos: &apirequest.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
	}
	if err := reg.Register(c.total); err != nil {
		return nil, fmt.Errorf("cannot register %s: %w", MetricName, err)
	}
	return c, nil
}

// Wrap returns a RoundTripper that counts every request rt sends; it fits
// rest.Config.Wrap.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, counter: c}
}

type countingTransport struct {
	next    http.RoundTripper
	counter *Counter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := ""
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	verb, resource := t.counter.describe(req)
	t.counter.total.WithLabelValues(verb, resource, code).Inc()
	return resp, err
}

// describe names a request's verb and resource as the apiserver would.
func (c *Counter) describe(req *http.Request) (verb, resource string) {
	info, err := c.infos.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return req.Method, ""
	}
	resource = info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	return info.Verb, resource
}

// WrappedRoundTripper lets client-go reach the wrapped transport, for
// instance to cancel requests or close idle connections.
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
