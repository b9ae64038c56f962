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

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func TestOnceWarnings(t *testing.T) {
	const deprecated = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
	tests := map[string]struct {
		codes    []int
		messages []string
		want     int
	}{
		"a repeated warning is logged once": {codes: []int{299, 299, 299}, messages: []string{deprecated, deprecated, deprecated}, want: 1},
		"distinct warnings are each logged": {codes: []int{299, 299, 299}, messages: []string{deprecated, "other", deprecated}, want: 2},
		"other codes are not warnings":      {codes: []int{199}, messages: []string{deprecated}, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			w := newOnceWarnings()
			for i, code := range tc.codes {
				w.HandleWarningHeaderWithContext(ctx, code, "-", tc.messages[i])
			}
			logged := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if diff := cmp.Diff(tc.want, strings.Count(logged, "Warning from the API server")); diff != "" {
				t.Errorf("warnings logged (-want +got):\n%s\n%s", diff, logged)
			}
		})
	}
}
